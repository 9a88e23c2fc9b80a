"""The reader's widgets: the course's trained models in the browser. Loaded by ``conf.py``.

A page holds a widget with the directive ``.. widget:: language-model`` (``:model: char-lm``),
which writes an empty ``<div class="attention-widget" data-widget="language-model"
data-model="char-lm">``: without JavaScript the page reads as it would without it. This
extension, at the end of a build,

- copies the widgets' JavaScript (``web/src``) to ``_static/widgets/`` and the runtime, ONNX
  Runtime Web, from ``web/node_modules`` (``npm ci``, which ``make html`` runs) to
  ``_static/ort/``: everything is served by the site itself, nothing from a CDN;
- exports each widget's model (:data:`MODELS`) with :func:`attention.export.export_onnx` to
  ``_static/models/<name>.onnx``, checks it in ONNX Runtime against the PyTorch model (the build
  fails above 1e-4), and writes ``<name>.json`` (what the widget needs: vocabulary, sizes, the
  first prompt) and ``<name>.reference.json`` (PyTorch's logits and weights for that prompt,
  which the browser tests compare with the widget's). The model is the one the page trained in
  this process (:data:`attention.recipes.TRAINED`), trained again only when the page did not
  run in this build and the site has no export of it yet. The Chinese build copies the English
  build's files.

The widget's script is added to the pages that hold one, as a module; the runtime's 15 MB load
only when a reader starts a widget.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
#: The files of ONNX Runtime Web that its wasm build loads: the module, its glue, the binary.
RUNTIME = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
#: Each widget's model: the page that trains it, its recipe, and the first input it reads.
MODELS = {
    "char-lm": {
        "page": "tutorials/4_generation/16_language_model",
        "recipe": "fit_char_lm",
        "prompt": 'def attention(query, key, value):\n    """Return the',
    },
    "sentiment": {
        "page": "tutorials/3_training_and_reading/11_visualising_attention",
        "recipe": "fit_sentiment_classifier",
        "prompt": "the film was not bad",
    },
    "dates": {
        "page": "tutorials/4_generation/15_encoder_decoder",
        "recipe": "fit_date_model",
        "prompt": "the 3rd of March 2021",  # the page's day, in the format its figure draws
    },
}
MARKER = 'class="attention-widget"'
#: The widgets a page may hold, each a module of web/src.
WIDGETS = ("language-model", "classifier", "dates")


class WidgetDirective(Directive):
    """``.. widget:: language-model`` with ``:model: char-lm``: the widget's empty element."""

    required_arguments = 1
    option_spec = {"model": directives.unchanged_required}

    def run(self):
        kind, model = self.arguments[0], self.options.get("model", "")
        if kind not in WIDGETS:
            raise self.error(f"widget must be one of {', '.join(WIDGETS)}; got {kind!r}")
        if model not in MODELS:
            raise self.error(f":model: must be one of {', '.join(MODELS)}; got {model!r}")
        html = f'<div class="attention-widget" data-widget="{kind}" data-model="{model}"></div>'
        return [nodes.raw("", html, format="html")]


def _load(name: str, seed: int):
    """The widget model ``name`` as its page trained it (from this process's recipe cache when
    the page ran), the ids of its first input, and what its widget needs to know of it."""
    import torch

    from attention import recipes

    spec = MODELS[name]
    model, _, _ = getattr(recipes, spec["recipe"])(seed=seed)
    model.eval()
    if name == "dates":
        return _load_dates(model, spec["prompt"])
    if name == "char-lm":
        from attention.text import CharTokenizer, python_docs

        vocab = list(CharTokenizer(python_docs()).vocab)
        ids = {char: i for i, char in enumerate(vocab)}
        tokens = [ids.get(char, 0) for char in spec["prompt"]]
        card = {"vocab": vocab, "heads": model.blocks[0].self_attn.num_heads}
    else:
        from attention.data import CLASSES, PAD_ID, VOCAB, encode

        tokens = encode(spec["prompt"]).tolist()
        card = {"vocab": list(VOCAB), "pad": VOCAB[PAD_ID], "classes": list(CLASSES),
                "heads": model.blocks[0].self_attn.num_heads}  # fmt: skip
    card |= {"max_len": model.max_len, "layers": len(model.blocks), "prompt": spec["prompt"]}
    return model, torch.tensor([tokens]), card


def _load_dates(model, prompt: str):
    """The date model, its first source with the target that greedy decoding writes for it
    (``eos`` left out: the ids the graph reads last), and its card."""
    import datetime

    from attention import dates

    src = dates.encode_sources([prompt]).to(model.head.weight.device)  # (1, S)
    output = model.generate(src, 11, bos_id=dates.BOS_ID, eos_id=dates.EOS_ID)  # (1, <= 12)
    day = datetime.date(2021, 3, 3)
    card = {
        "src_vocab": list(dates.SOURCE_VOCAB), "tgt_vocab": list(dates.TARGET_VOCAB),
        "pad": dates.PAD_ID, "bos": dates.BOS_ID, "eos": dates.EOS_ID,
        "max_len": model.max_len, "max_new_tokens": 11,  # ten characters and eos
        "layers": len(model.decoder), "encoder_layers": len(model.encoder),
        "heads": model.decoder[0].num_heads, "prompt": prompt,
        "first_day": dates.FIRST_DAY.isoformat(), "last_day": dates.LAST_DAY.isoformat(),
        "formats": [[f, dates.write_date(day, f)[0]] for f in dates.FORMATS],
    }  # fmt: skip
    return model, (src, output[:, :-1]), card


def _dates_reference(model, src, tgt, card: dict) -> dict:
    """PyTorch's greedy output for the date model's first source, the logits of every step
    (:math:`(T, V)`, row ``t`` chose output ``t + 1``) and the cross-attention of every layer
    and head (:math:`(\text{layers}, H, T, S)`, row ``t`` wrote output ``t + 1``)."""
    import torch

    from attention.dates import decode_target

    with torch.no_grad():
        logits, weights = model(src, tgt, need_weights=True)
    output = model.generate(src, card["max_new_tokens"], bos_id=card["bos"], eos_id=card["eos"])
    return {
        "prompt": card["prompt"],
        "src": src[0].tolist(),
        "output": output[0].tolist(),  # bos, the characters, eos
        "answer": decode_target(output[0]),
        "logits": logits[0].tolist(),  # (T, V)
        "cross": torch.stack(weights.cross, dim=1)[0].tolist(),  # (layers, H, T, S)
    }


def export_model(name: str, static: Path, seed: int) -> None:
    """Export the widget model ``name`` into ``static/models``, checked, with its two JSONs."""
    import torch

    from attention.export import check_onnx, export_onnx

    model, tokens, card = _load(name, seed)
    models = static / "models"
    models.mkdir(parents=True, exist_ok=True)
    path = export_onnx(model, models / f"{name}.onnx")
    difference = check_onnx(path, model, tokens, atol=1e-4)
    (models / f"{name}.json").write_text(json.dumps(card, ensure_ascii=False))
    if name == "dates":
        reference = _dates_reference(model, *tokens, card) | {"onnx_difference": difference}
        (models / f"{name}.reference.json").write_text(json.dumps(reference))
        return
    with torch.no_grad():
        logits, weights = model(tokens, need_weights=True)
    reference = {
        "prompt": card["prompt"],
        "ids": tokens[0].tolist(),
        "logits": logits[0].tolist(),  # (L, V) or (C,)
        "weights": torch.stack(weights, dim=1)[0].tolist(),  # (layers, H, L, L)
        "onnx_difference": difference,
    }
    (models / f"{name}.reference.json").write_text(json.dumps(reference))


def _copy_static(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    (static / "widgets").mkdir(parents=True, exist_ok=True)
    for script in sorted((WEB / "src").glob("*.js")):
        shutil.copy2(script, static / "widgets" / script.name)
    dist = WEB / "node_modules" / "onnxruntime-web" / "dist"
    if not all((dist / name).is_file() for name in RUNTIME):
        raise ExtensionError(
            f"ONNX Runtime Web is not installed in {dist.parent}: run `npm ci` in web/ "
            "(`make html` does)"
        )
    (static / "ort").mkdir(exist_ok=True)
    for name in RUNTIME:
        shutil.copy2(dist / name, static / "ort" / name)
    english = Path(app.outdir).parent / "_static" / "models"
    for name, spec in MODELS.items():
        page = Path(app.outdir) / f"{spec['page']}.html"
        if app.config.language == "zh_CN" and (english / f"{name}.onnx").is_file():
            shutil.copytree(english, static / "models", dirs_exist_ok=True)
        elif page.is_file() and (_trained_here(name) or not (static / "models" / f"{name}.onnx")
                                 .is_file()):  # fmt: skip
            export_model(name, static, int(os.environ.get("ATTENTION_SEED", "0")))


def _trained_here(name: str) -> bool:
    """Whether this process trained the widget's model (its page ran in this build)."""
    from attention import recipes

    return any(key[1] == MODELS[name]["recipe"] for key in recipes.TRAINED)


def _add_script(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body", "")
    for kind in WIDGETS:
        if f'{MARKER} data-widget="{kind}"' in body:
            app.add_js_file(f"widgets/{kind}.js", type="module")


def setup(app):
    app.add_directive("widget", WidgetDirective)
    app.connect("html-page-context", _add_script)
    app.connect("build-finished", _copy_static)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
