"""NeMo AutoModel's benchmark rows as they ran: which configuration file and commit each row's
unpublished settings come from, and what those files set (read by import_measured_runs.py)."""

# The configuration behind each AutoModel row: the benchmark file the page links (or the one beside
# it for the Nemotron V3 Super / Nano and 1,024-GPU DeepSeek-V3 rows), at the first commit of
# NVIDIA-NeMo/Automodel where it carries the batch and parallelism the row publishes. The October
# 2025 rows (docs/performance-summary.md, 89e3a9fd, unchanged since) match the files of 2c236e08
# (2025-10-08: gpt-oss 120B's GBS 512, PP 1, EP 64 and the 1,024-GPU DeepSeek-V3 file first appear
# there); Qwen3-30B's row and file both moved to GBS 512 in 8d9bfb90; later rows the files of the
# commit that published them. The files have moved on since (gpt-oss 20B stopped checkpointing on
# 2025-11-17, f51c8eac; the 1,024-GPU DeepSeek-V3 file in 2026): the source's commit (36044ad3)
# is not the runs' configuration.
AUTOMODEL_CONFIG = {  # row id -> (commit, path)
    "automodel-h100-deepseek_v3-1024gpu": ("2c236e08", "examples/benchmark/configs/deepseek_v3_te_deepep_1024.yaml"),
    "automodel-h100-deepseek_v3-256gpu": ("2c236e08", "examples/benchmark/configs/deepseek_v3_te_deepep.yaml"),
    "automodel-h100-kimi_k2-256gpu": ("2c236e08", "examples/benchmark/configs/kimi_k2_te_deepep.yaml"),
    "automodel-h100-qwen3_30b_a3b-8gpu": ("8d9bfb90", "examples/benchmark/configs/qwen3_moe_30b_te_deepep.yaml"),
    "automodel-h100-gpt_oss_20b-8gpu": ("2c236e08", "examples/benchmark/configs/gptoss_20b_te_deepep.yaml"),
    "automodel-h100-gpt_oss_120b-64gpu": ("2c236e08", "examples/benchmark/configs/gptoss_120b_te_deepep.yaml"),
    "automodel-h100-nemotron_3_nano-8gpu": ("bb0c0bfb", "examples/benchmark/configs/nemotron_nano_v3_te_deepep.yaml"),
    "automodel-h100-nemotron_3_super-64gpu": ("c0e4fe1b", "examples/benchmark/configs/nemotron_super_v3_te_deepep.yaml"),
    "automodel-h100-nemotron_3_ultra-128gpu": ("cb976544", "examples/llm_benchmark/nemotron/nemotron_ultra_v3_te_deepep.yaml"),
    "automodel-h100-llama31_70b-64gpu": ("2013a4dd", "examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml"),
}

# Expert parallelism of AutoModel's rows whose table leaves EP blank: `ep_size` in the row's
# configuration; their "Kernel Optimizations" name DeepEP, an expert-parallel dispatcher.
AUTOMODEL_EP = {
    "automodel-h100-gpt_oss_20b-8gpu": 8,
    "automodel-h100-gpt_oss_120b-64gpu": 64,
}

# AutoModel's MoE rows route with the benchmark gate: `fake_balanced_gate: true` in each row's
# configuration (above), components/moe/layers.py FakeBalancedGate (its noise 0 by default):
# token t's experts are arange(tokens x k) % E, t·k ... t·k + k - 1, whatever the scores or the
# model's group limit (expert_routing round-robin).
AUTOMODEL_FAKE_GATE = {
    "automodel-h100-nemotron_3_super-64gpu", "automodel-h100-nemotron_3_nano-8gpu", "automodel-h100-nemotron_3_ultra-128gpu",
    "automodel-h100-deepseek_v3-1024gpu", "automodel-h100-deepseek_v3-256gpu", "automodel-h100-kimi_k2-256gpu",
    "automodel-h100-qwen3_30b_a3b-8gpu", "automodel-h100-gpt_oss_20b-8gpu", "automodel-h100-gpt_oss_120b-64gpu",
}

# Activation checkpointing of AutoModel's rows, which the table does not publish:
# `activation_checkpointing` in the row's configuration (above): true or false (unset means false,
# components/distributed/config.py). `true` checkpoints whole decoder blocks, keeping only the
# router's projection and top-k (components/moe/parallelizer.py apply_ac), or each block's attention
# and MLP for dense models: full recomputation. Every row's configuration sets it but gpt-oss 120B's;
# without it the runs would need 100-375 GiB per 80 GiB H100 (bf16 weights and Adam state,
# master_weights below).
AC_WORDS = {True: "true", False: "false"}
AUTOMODEL_AC = {
    "automodel-h100-nemotron_3_super-64gpu": True,
    "automodel-h100-nemotron_3_nano-8gpu": True,
    "automodel-h100-nemotron_3_ultra-128gpu": True,
    "automodel-h100-deepseek_v3-1024gpu": True,
    "automodel-h100-deepseek_v3-256gpu": True,
    "automodel-h100-kimi_k2-256gpu": True,
    "automodel-h100-qwen3_30b_a3b-8gpu": True,
    "automodel-h100-gpt_oss_20b-8gpu": True,
    "automodel-h100-gpt_oss_120b-64gpu": False,
    "automodel-h100-llama31_70b-64gpu": True,
}

# Multi-token prediction in AutoModel's rows: only the Nemotron 3 Ultra configuration trains it
# (num_nextn_predict_layers 2, mtp_use_repeated_layer true: one physical module run at both depths,
# its layers Ultra's mtp_layers_block_type ["attention", "moe"], components/models/nemotron_v3/
# mtp.py). The other rows' commits have no MTP code for their models (components/models at
# 2c236e08, bb0c0bfb, c0e4fe1b).
AUTOMODEL_MTP = {  # row id -> (modules, layers in hybrid symbols, one module's weights shared)
    "automodel-h100-nemotron_3_ultra-128gpu": (2, "*E", True),
}

# Pipeline stages of AutoModel's pipelined rows: `layers_per_stage` in the row's configuration
# (above). components/distributed/pipelining/functional.py at the rows' commits makes
# ceil(layers / layers_per_stage) + 1 stages, rounded down to a multiple of PP
# (round_virtual_stages_to_pp_multiple: down), each rank holding every PP-th stage ("loop"), and
# splits the decoder layers in order, the first layers % stages stages one layer more, the
# embedding on the first stage, the final norm and head on the last
# (generate_hf_model_fqn_per_model_part). The 1,024-GPU DeepSeek-V3 file sets 4 (16 stages: 4 a
# rank) where the table prints VP 8, the 256-GPU one's 2 (32 stages: 8 a rank).
AUTOMODEL_LAYERS_PER_STAGE = {
    "automodel-h100-deepseek_v3-1024gpu": 4,
    "automodel-h100-deepseek_v3-256gpu": 2,
    "automodel-h100-kimi_k2-256gpu": 2,
}


def automodel_pipeline(row_id, layers, pp, table_vp, plan, assumed):
    """Sets an AutoModel pipelined row's virtual_stages (stages per pipeline rank) and
    pipeline_layout from its configuration, with the assumption; nothing for the other rows."""
    per_stage = AUTOMODEL_LAYERS_PER_STAGE.get(row_id)
    if per_stage is None:
        return
    stages = -(-layers // per_stage) + 1
    stages -= stages % pp
    # AutoModel's own checks (functional.py): a multi-stage schedule, no stage without a layer.
    assert stages // pp >= 2 and stages <= layers, f"{row_id}: {stages} stages of {layers} layers over PP {pp}"
    base, extra = divmod(layers, stages)
    chunks = [("E" if i == 0 else "") + f"t*{base + (i < extra)}" + ("L" if i == stages - 1 else "") for i in range(stages)]
    commit, yaml = AUTOMODEL_CONFIG[row_id]
    note = (f"{stages // pp} stages per pipeline rank and AutoModel's layer split (first stages one layer more): layers_per_stage "
            f"{per_stage} in {yaml} at NVIDIA-NeMo/Automodel@{commit} makes {stages} stages of {layers} layers "
            "(components/distributed/pipelining/functional.py)" + (f"; the table prints VP {table_vp}" if table_vp != stages // pp else ""))
    plan["virtual_stages"], plan["pipeline_layout"] = stages // pp, "|".join(chunks)
    assumed.append(note)
