"""LoRA on the learner's policy (`learner.lora`): peft adapters on a frozen base, their
PEFT-format names and folder, and merging them into the base (adapters.py). It imports the
learner's config, mesh and offload modules and, inside its functions, peft; nothing above the
learner.
"""

from microcoder.learner.lora.adapters import (  # noqa: F401  (the room's public names)
    ADAPTER,
    PEFT_PREFIX,
    adapter_config,
    adapter_state_dict,
    apply_lora,
    base_state_dict,
    checkpoint_name,
    has_adapters,
    init_adapters,
    is_adapter,
    merge_into,
    merged_state_dict,
    peft_name,
    write_adapter_folder,
)
