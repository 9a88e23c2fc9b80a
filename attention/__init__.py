"""The attention mechanism in PyTorch, readable line by line and exact against PyTorch."""

from .block import FeedForward, TransformerBlock, TransformerDecoderBlock
from .cache import KVCache
from .classifier import AttentionClassifier
from .decoder import CausalSelfAttention
from .functional import scaled_dot_product_attention
from .fused import FusedMultiHeadAttention
from .language_model import DecoderLM
from .latent import LatentCache, MultiHeadLatentAttention
from .linear_attention import LinearAttention, RecurrentState
from .masks import (
    causal_mask,
    document_mask,
    padding_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from .multi_head import MultiHeadAttention
from .paged import PagedKVCache
from .positions import PositionalEncoding, RotaryEmbedding, alibi_bias
from .seq2seq import Seq2SeqTransformer
from .single_head import SelfAttention
from .state import DecodingState
from .tiled import tiled_attention
from .viz import mask_legend, plot_attention, plot_blocks, plot_mask, plot_matrix

__version__ = "0.1.0"

__all__ = [
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "document_mask",
    "prefix_lm_mask",
    "scaled_dot_product_attention",
    "tiled_attention",
    "SelfAttention",
    "MultiHeadAttention",
    "FusedMultiHeadAttention",
    "FeedForward",
    "TransformerBlock",
    "PositionalEncoding",
    "RotaryEmbedding",
    "alibi_bias",
    "AttentionClassifier",
    "plot_attention",
    "plot_matrix",
    "plot_mask",
    "mask_legend",
    "plot_blocks",
    "CausalSelfAttention",
    "KVCache",
    "PagedKVCache",
    "DecodingState",
    "DecoderLM",
    "TransformerDecoderBlock",
    "Seq2SeqTransformer",
    "MultiHeadLatentAttention",
    "LatentCache",
    "LinearAttention",
    "RecurrentState",
]
