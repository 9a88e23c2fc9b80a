"""Names the package's docstring examples use, as a reader would have imported them."""

import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import torch
    import torch.nn.functional as F
    from torch import nn

    import attention
    import attention.data
    import attention.masks

    doctest_namespace.update(torch=torch, nn=nn, F=F)
    doctest_namespace.update({name: getattr(attention, name) for name in attention.__all__})
    doctest_namespace.update(
        {name: getattr(attention.masks, name) for name in attention.masks.__all__}
    )
    doctest_namespace.update(
        {name: getattr(attention.data, name) for name in attention.data.__all__}
    )
    torch.manual_seed(0)
