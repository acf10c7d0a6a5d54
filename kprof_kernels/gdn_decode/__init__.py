"""Gated-DeltaNet decode: fused QKVZBA split + causal conv1d update, and the packed recurrent decode."""
