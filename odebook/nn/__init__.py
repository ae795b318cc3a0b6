"""Mixers and blocks: one concept per file, a plain reference beside each fast path."""

from odebook.nn.attention import MLP, CausalSelfAttention, attention_reference, causal_attention, gelu_mlp
from odebook.nn.block import Block
from odebook.nn.depth import DepthStack, TimeMLP, sinusoidal_embedding
from odebook.nn.hypernet import HyperBlock
from odebook.nn.modulated import GatedBlock, OutputGatedBlock, SSMGatedBlock
from odebook.nn.kv_cache import KVCache
from odebook.nn.ode import ODEFlowBlock, VectorField, euler_reference
from odebook.nn.ssm import ModulatedSSM, memoryless_scan, selective_scan

__all__ = ["MLP", "Block", "CausalSelfAttention", "attention_reference", "causal_attention", "gelu_mlp", "DepthStack",
           "TimeMLP", "sinusoidal_embedding", "HyperBlock", "GatedBlock", "OutputGatedBlock", "SSMGatedBlock",
           "KVCache", "ODEFlowBlock", "VectorField", "euler_reference", "ModulatedSSM", "selective_scan",
           "memoryless_scan"]
