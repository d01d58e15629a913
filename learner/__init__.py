"""MicroCoder-GRPO: advantages, conditional truncation mask, loss; FSDP2 step; checkpoints; weight broadcast."""
