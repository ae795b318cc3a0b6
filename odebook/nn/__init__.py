"""Mixers and blocks: one concept per file, a plain reference beside each fast path."""

from odebook.nn.attention import MLP, Block, CausalSelfAttention, attention_reference
from odebook.nn.ode import ODEFlowBlock, VectorField, euler_reference

__all__ = ["MLP", "Block", "CausalSelfAttention", "attention_reference", "ODEFlowBlock", "VectorField",
           "euler_reference"]
