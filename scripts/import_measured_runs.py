#!/usr/bin/env python3
"""Turn the published measured runs (measured_runs.json, one row per published run with its full
configuration and source) into shardsim's runs format (docs/accuracy.md): per run a shardsim model
JSON, a cluster preset, a plan JSON, the measured step time, the source and every assumption made
to fill what the source does not publish. The same rules apply to every row of a source; rows
shardsim cannot express yet, or not in that row format, are listed under "skipped" with the reason.

The split: within each (source family, chip) group, rows sorted by id alternate between "fit"
(used by `shardsim calibrate --from-runs` to fit efficiencies) and "test" (only predicted); rows of
model types imported after the split was drawn (TEST_ONLY_TYPES) are test rows, and so are the rows of
scripts/runs_beyond_shared/*.json: published runs the shared set does not hold, in its row format,
collected for shardsim to check its predictions on systems and runs nothing was fitted to.

Usage: scripts/import_measured_runs.py SHARED/measured_runs.json tests/data/measured_runs.json
"""
import glob, json, os, re, sys

BASE_MAXTEXT = dict(num_layers=16, hidden_size=2560, num_heads=8, head_dim=256, ffn_hidden_size=8192, vocab_size=32768)


class Skip(Exception):
    pass


# Hybrid Mamba-2 models (nemotron_h) whose configuration the collected rows do not record: taken
# from Megatron-LM's own arguments for them (examples/post_training/modelopt/conf/nvidia/ at
# NVIDIA/Megatron-LM@d98e8a64dd), Megatron-core's defaults for what those leave out
# (transformer_config.py mamba_state_dim 128, mamba_num_groups 8; mamba_mixer.py d_conv 4,
# chunk_size 128) and NemotronHConfig's vocabulary of 131072. Each shared expert is two routed
# experts' width. The shardsim preset nemotron-3-nano-30b-a3b is the Nano. Super and Ultra route their
# experts in a latent width (--moe-latent-size); their multi-token-prediction layers, which the
# Megatron arguments do not set, are left out (counted so, 120.7B / 12.8B and 549.3B / 56.1B
# parameters against the published 120B-A12B and 550B-A55B).
NEMOTRON_H = {
    "nemotron_3_nano": {
        "name": "nemotron_3_nano", "hybrid_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "num_layers": 52,
        "hidden_size": 2688, "num_heads": 32, "num_kv_heads": 2, "head_dim": 128, "ffn_hidden_size": 1856, "mlp": "relu2",
        "norm": "rmsnorm", "position": "none", "vocab_size": 131072, "tied_embeddings": False, "linear_bias": False,
        "moe": {"num_experts": 128, "top_k": 6, "num_shared_experts": 2, "expert_ffn_hidden_size": 1856},
        "mamba": {"num_heads": 64, "head_dim": 64, "state_size": 128, "groups": 8, "conv_kernel": 4, "chunk_size": 128},
        "source": "NVIDIA/Megatron-LM@d98e8a64dd:examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh "
                  "with Megatron-core's defaults (mamba_state_dim 128, mamba_num_groups 8, d_conv 4, chunk_size 128) and NemotronHConfig's vocabulary 131072",
    },
    "nemotron_3_super": {
        "name": "nemotron_3_super",
        "hybrid_pattern": "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME", "num_layers": 88,
        "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 2, "head_dim": 128, "ffn_hidden_size": 2688, "mlp": "relu2",
        "norm": "rmsnorm", "position": "none", "vocab_size": 131072, "tied_embeddings": False, "linear_bias": False,
        "moe": {"num_experts": 512, "top_k": 22, "num_shared_experts": 2, "expert_ffn_hidden_size": 2688, "latent_size": 1024},
        "mamba": {"num_heads": 128, "head_dim": 64, "state_size": 128, "groups": 8, "conv_kernel": 4, "chunk_size": 128},
        "source": "NVIDIA/Megatron-LM@d98e8a64dd:examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh "
                  "with Megatron-core's defaults (mamba_state_dim 128, mamba_num_groups 8, d_conv 4, chunk_size 128) and NemotronHConfig's vocabulary 131072; "
                  "its multi-token-prediction layers left out",
    },
    "nemotron_3_ultra": {
        "name": "nemotron_3_ultra",
        "hybrid_pattern": "MEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        "num_layers": 108, "hidden_size": 8192, "num_heads": 64, "num_kv_heads": 2, "head_dim": 128, "ffn_hidden_size": 5120, "mlp": "relu2",
        "norm": "rmsnorm", "position": "none", "vocab_size": 131072, "tied_embeddings": False, "linear_bias": False,
        "moe": {"num_experts": 512, "top_k": 22, "num_shared_experts": 2, "expert_ffn_hidden_size": 5120, "latent_size": 2048},
        "mamba": {"num_heads": 256, "head_dim": 64, "state_size": 128, "groups": 8, "conv_kernel": 4, "chunk_size": 128},
        "source": "NVIDIA/Megatron-LM@d98e8a64dd:examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.sh "
                  "with Megatron-core's defaults (mamba_state_dim 128, mamba_num_groups 8, d_conv 4, chunk_size 128) and NemotronHConfig's vocabulary 131072; "
                  "its multi-token-prediction layers left out",
    },
}


def model_of(row):
    c = row["model"]["config"]
    t = c.get("model_type")
    name = row["model"]["arch_key"] or row["model"]["name_as_published"]
    src = row["model"]["config"].get("arch_source", "")
    if t in ("nemotron_h",):
        if row["model"]["arch_key"] not in NEMOTRON_H:
            raise Skip("a Nemotron-H model whose configuration is not recorded")
        return dict(NEMOTRON_H[row["model"]["arch_key"]], max_seq_len=max(row["batch"]["seq_len"], 8192))
    if c.get("hidden_size") is None:
        raise Skip("architecture not published")
    m = {
        "name": name,
        "num_layers": c["num_hidden_layers"],
        "hidden_size": c["hidden_size"],
        "num_heads": c["num_attention_heads"],
        "num_kv_heads": c.get("num_key_value_heads") or c["num_attention_heads"],
        "head_dim": c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
        "ffn_hidden_size": c.get("intermediate_size_mlp") or c["intermediate_size"],
        "mlp": "swiglu" if c.get("mlp_gated") else "gelu",
        "norm": "layernorm" if t in ("gpt2", "mpt", "nemotron") else "rmsnorm",
        "position": "learned" if c.get("position_embedding") == "learned_absolute" else "rope",
        "vocab_size": c["vocab_size"],
        "max_seq_len": max(row["batch"]["seq_len"], 2048),
        "tied_embeddings": bool(c.get("tie_word_embeddings")),
        "linear_bias": bool(c.get("bias")),
        "source": src,
    }
    if t == "gpt_oss":
        # modeling_gpt_oss.py: biased attention projections, experts and router; local layers
        # (sliding_window) alternating with global ones, the first local (GptOssConfig's
        # layer_types); each head's sink logit is not counted.
        if not c.get("layer_types", "").startswith("alternating sliding_attention"):
            raise Skip(f"gpt_oss layer_types '{c.get('layer_types')}' not understood")
        m["linear_bias"] = True
        m["sliding_window"] = {"window": c["sliding_window"], "global_every": 2}
    experts = c.get("n_routed_experts") or c.get("num_local_experts") or c.get("num_experts")
    if experts:
        moe = {"num_experts": experts, "top_k": c["num_experts_per_tok"],
               "num_shared_experts": c.get("n_shared_experts") or 0,
               "expert_ffn_hidden_size": c.get("moe_intermediate_size") or c["intermediate_size"],
               "first_dense_layers": c.get("first_k_dense_replace") or 0,
               "layer_interval": c.get("interleave_moe_layer_step") or 1}
        m["moe"] = moe
        if moe["first_dense_layers"] == 0 and moe["layer_interval"] == 1:
            m["ffn_hidden_size"] = moe["expert_ffn_hidden_size"]
    if c.get("kv_lora_rank"):
        m["mla"] = {k: c[k] or 0 for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}
    return m


def cluster_of(row):
    h = row["hardware"]
    n = h["num_devices"]
    chip = h["chip"]
    if "TPU v5e" in chip or "TPU v6e" in chip or "Trillium" in chip:
        # MaxText's v5e tables: slices of 256 chips (a pod, 16 x 16), joined by DCN; v6e's likewise.
        system = "tpu-v5e" if "v5e" in chip else "tpu-v6e"
        slices = row["parallelism"].get("dcn_data_parallelism") or 1
        if n // slices != 256:
            raise Skip(f"no torus shape for {n // slices} {system[4:]} chips per slice")
        return f"{system}:16x16" + (f",slices={slices}" if slices > 1 else "")
    if "TPU v5p" in chip or "TPU v4" in chip:
        system = "tpu-v5p" if "v5p" in chip else "tpu-v4"
        slices = row["parallelism"].get("dcn_data_parallelism") or 1
        per = n // slices
        shapes = {64: "4x4x4", 128: "4x4x8", 192: "4x4x12", 256: "4x8x8", 512: "8x8x8", 1024: "8x8x16", 2048: "8x16x16", 4096: "16x16x16"}
        if per not in shapes:
            raise Skip(f"no torus shape for {per} chips per slice")
        return f"{system}:{shapes[per]}" + (f",slices={slices}" if slices > 1 else "")
    if rack := re.search(r"GB([23]00)", chip):
        # NeMo's GB200 jobs use 64 of each NVL72 rack's 72 GPUs beyond one rack (an assumption:
        # the pages give the GPU count only); GB300's likewise; whole racks where 64 does not divide.
        if n > 72 and n % 64 and n % 72:
            raise Skip(f"{n} GPUs are neither racks of 64 nor of 72")
        return f"gb{rack.group(1)}-nvl72:{n}" + (",domain=64" if n > 72 and n % 64 == 0 else "")
    if blackwell := re.search(r"B([23]00)", chip):
        return f"dgx-b{blackwell.group(1)}:{n}"
    if "H800" in chip:
        return f"hgx-h800:{n}"
    if "H200" in chip:
        return f"dgx-h200:{n}"
    if "H100" in chip and "HBM2e" in chip:
        return f"grand-teton-h100:{n}"  # Meta's 96 GB HBM2e H100s at 500 W (torchtitan's benchmarks)
    if "H100" in chip:
        return f"dgx-h100:{n}"
    if "A100" in chip:
        return f"dgx-a100:{n}"
    raise Skip(f"no preset for chip '{chip}'")


# NeMo's recommended configurations that offload activations (activation_offload_layers > 0), by
# (model, GB200, tp, pp, cp, FSDP, dtype): the one row of the GB200 table.
NEMO_OFFLOAD_SOURCE = ("NVIDIA/NeMo@06c0e70057f272483a1a33c6bb5a9baf7be48cdc:"
                       "scripts/performance/recommended_model_configs/model_configs_gb200.csv")
NEMO_OFFLOAD = {("llama31_405b", True, 2, 1, 1, True, "fp8"): 95}


def recompute_of(text, assumed, default, family):
    if text is None:
        assumed.append(f"recompute: {default} (not published)")
        return default
    t = text.lower()
    if t.startswith("none"):
        return "none"
    if "minimal" in t:
        return "minimal"  # MaxText's remat_policy minimal
    if family == "torchtitan" and "selective" in t:
        # torchtitan's selective AC: per-layer (selective_ac_option an integer) or per-op.
        return "selective-layer" if "layer" in t else "selective-op"
    if "selective" in t:
        return "selective"
    if "full" in t:
        return "full"
    raise Skip(f"recompute '{text}' not understood")


MONTHS = {m: i + 1 for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"])}


# torchtitan's norm_type in the train config of the A100 table's runs (docs/performance.md, added in
# 395a52627 and 1ea476e9f, April 2024; train_configs/*.toml there): a Triton kernel per RMSNorm
# (fused_rmsnorm) for Llama 3 8B and Llama 2 13B, PyTorch primitives (rmsnorm) for the 70B models.
# Uncompiled (compile = false in each), their activations and rotary embeddings ran eagerly.
TORCHTITAN_A100_NORM = {"llama3_8b": "fused_rmsnorm", "llama2_13b": "fused_rmsnorm", "llama3_70b": "rmsnorm", "llama2_70b": "rmsnorm"}


def run_date(row):
    """The (year, month) the source's reference gives for the run ("...; Dec 2024)")."""
    m = re.search(r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* (\d{4})\)?$", row["source"]["ref"])
    if not m:
        raise Skip("no run date in the source reference")
    return int(m.group(2)), MONTHS[m.group(1)]


def dtype_of(row):
    p = row["training"]["precision"]
    if p is None:
        raise Skip("precision not published")
    return "fp8" if p.startswith("fp8") else "bf16"


from automodel_configs import AC_WORDS, AUTOMODEL_AC, AUTOMODEL_CONFIG, AUTOMODEL_EP, AUTOMODEL_FAKE_GATE, AUTOMODEL_MTP, automodel_pipeline  # noqa: E402

# Megatron-core's tensor-parallel communication overlap (Transformer Engine's userbuffers) in the
# configurations behind NeMo's performance summaries. 24.07: ub_tp_comm_overlap in
# NeMo-Framework-Launcher's launcher_scripts/conf/training/<file>, at tag 24.07 (8325688d) or, where
# the tag's file has another layout than the published one, at the first commit with it (GPT-3
# 175B's VP 6 on branch 24.09, 77b69bba: off as at the tag; Nemotron-4 340B's PP 8 x VP 12 at
# 7f53c589, which also turned the overlap on).
NEMO2407_TP_OVERLAP = {
    "gpt3_20b": ("gpt3/20b.yaml at tag 24.07", True),
    "gpt3_175b": ("gpt3/175b.yaml at 77b69bba (branch 24.09, the published VP 6)", False),
    "llama2_70b": ("llama/llama2_70b.yaml at tag 24.07", True),
    "nemotron3_8b": ("nemotron/nemotron_8b.yaml at tag 24.07", True),
    "nemotron3_22b": ("nemotron/nemotron_22b.yaml at tag 24.07", True),
    "nemotron4_340b": ("nemotron/nemotron_340b.yaml at 7f53c589 (the published PP 8 x VP 12)", True),
    "llama3_70b": ("llama/llama3_70b.yaml at tag 24.07", True),
}
# NeMo 2.0 (25.02, 25.04, 25.07): scripts/performance/llm/pretrain_<model>.py build the recipe
# with performance_mode, whose pretrain_performance_optimizations add
# MegatronCommOverlapCallback(tp_comm_overlap=True) (nemo/collections/llm/recipes/<model>.py at
# v2.2.0, v2.3.0, v2.4.0); the callback keeps it wherever TP > 1 with sequence parallelism
# (megatron_comm_overlap.py). v2.3.0's scripts/performance/utils.py turns it off under Megatron
# FSDP.
NEMO2_RELEASES = {"nemo2502": "v2.2.0", "nemo2504": "v2.3.0", "nemo2507": "v2.4.0"}


# Model types importable only after the split was drawn: their rows are test rows, so adding them
# leaves every earlier row's split as it was.
TEST_ONLY_TYPES = {"gpt_oss", "nemotron_h"}


def plan_of(row, assumed):
    fam = row["source_family"]
    par, bat = row["parallelism"], row["batch"]
    n = row["hardware"]["num_devices"]
    tp, pp, cp = par.get("tp") or 1, par.get("pp") or 1, par.get("cp") or 1
    ep = par.get("ep") or 1
    dp = n // (tp * pp * cp)
    if dp * tp * pp * cp != n:
        raise Skip("TP*PP*CP does not divide the devices")
    gbs, seq, mbs = bat["gbs"], bat["seq_len"], bat.get("mbs")
    plan = {"global_batch_size": gbs, "seq_len": seq, "dtype": dtype_of(row)}
    if plan["dtype"] == "fp8" and row["source_family"] == "torchtitan":
        # torchao's scaling as each run publishes it (torchtitan's default changed to row-wise).
        plan["fp8_recipe"] = "rowwise" if "rowwise" in row["training"]["precision"] else "tensorwise"
    elif plan["dtype"] == "fp8" and "current_scaling" not in row["training"]["precision"]:
        assumed.append("FP8 per-tensor scaling (Transformer Engine's delayed or current scaling; the recipe is not published)")
    mesh = {"tensor": tp, "pipeline": pp, "context": cp}
    if fam == "maxtext":
        slices = par.get("dcn_data_parallelism") or 1
        mesh.update(data=slices, fsdp=par["ici_fsdp_parallelism"])
        # Weights and optimizer state are sharded over fsdp inside a slice and replicated over the
        # slices (base.yml logical_axis_rules shard weights over fsdp, not data): ZeRO-0 over data.
        plan["zero_stage"] = 3 if slices == 1 else 0
        mbs = gbs // (slices * par["ici_fsdp_parallelism"])
        if tp > 1:
            # base.yml logical_axis_rules: activation_embed -> tensor (activations sharded over
            # tensor between layers, as sequence parallelism shards them).
            plan["sequence_parallel"] = True
        if tp > 1 and "v5p" in row["hardware"]["chip"]:
            # The v5p tables' scripts (MaxText/configs/v5p/*.sh at 76bd53b0f4) set LIBTPU_INIT_ARGS
            # with XLA's continuation fusion (--xla_tpu_enable_async_collective_fusion,
            # --xla_tpu_overlap_compute_collective_tc): collectives run beside compute.
            plan["overlap"] = {"tensor": True}
            assumed.append("overlap.tensor on: the tables' scripts (MaxText/configs/v5p/*.sh at 76bd53b0f4) pass XLA's "
                           "continuation-fusion flags in LIBTPU_INIT_ARGS (--xla_tpu_enable_async_collective_fusion=true, "
                           "--xla_tpu_overlap_compute_collective_tc=true), which overlap collectives with compute")
        if tp > 1 and "v5e" in row["hardware"]["chip"]:
            # The same flags in the v5e 128B script (MaxText/configs/v5e/128b.sh at 76bd53b0f4).
            plan["overlap"] = {"tensor": True}
            assumed.append("overlap.tensor on: its script (MaxText/configs/v5e/128b.sh at 76bd53b0f4) passes XLA's "
                           "continuation-fusion flags in LIBTPU_INIT_ARGS (--xla_tpu_enable_async_collective_fusion=true, "
                           "--xla_tpu_overlap_compute_collective_tc=true), which overlap collectives with compute")
        plan["recompute"] = recompute_of(row["training"]["recompute"], assumed, "full", fam)
        framework = "maxtext"
    elif fam == "llm_foundry":
        mesh["fsdp" if par["fsdp_published"] == "FULL_SHARD" else "data"] = dp
        plan["zero_stage"] = 3 if par["fsdp_published"] == "FULL_SHARD" else 2
        plan["recompute"] = recompute_of(row["training"]["recompute"], assumed, "none", fam)
        # Composer's amp_bf16 is torch.autocast over fp32 weights: FSDP shards the fp32 weights
        # (their own master), their fp32 gradients and AdamW's fp32 state.
        plan["master_weights"] = "fp32"
        assumed.append("master_weights fp32: Composer's amp_bf16 autocasts over fp32 weights, which FSDP shards with their fp32 gradients and AdamW state")
        # scripts/train/benchmarking/submit_benchmarks.py at 5e85bd62d, the commit that added the
        # H100 tables: --attn_impl defaults to triton (llmfoundry's Triton FlashAttention port).
        plan["attention_kernel"] = "triton"
        assumed.append("attention_kernel triton: --attn_impl's default in scripts/train/benchmarking/submit_benchmarks.py at 5e85bd62d (the tables' commit)")
        framework = "pytorch-fsdp"
    elif fam == "torchtitan":
        mesh.update(fsdp=par.get("dp_shard_fsdp") or dp, data=par.get("dp_replicate") or 1)
        plan["zero_stage"] = 3
        plan["recompute"] = recompute_of(row["training"]["recompute"], assumed, "none", fam)
        if tp > 1:
            plan["sequence_parallel"] = True
            # compile.enable_async_tensor_parallel, as each run publishes it.
            if par.get("async_tp") is None:
                assumed.append("async TP off (not published)")
            plan["overlap"] = {"tensor": bool(par.get("async_tp"))}
        # torchtitan/config/configs.py: mixed_precision_reduce: Literal["float32"].
        plan["grad_reduce_dtype"] = "fp32"
        # The loss is compiled (fused) with the model from April 2025 (components/loss.py, #1033);
        # before, never (train.py at 9dec370: "compiling loss function causes CUDA errors").
        year, month = run_date(row)
        compiled = bool(row["training"].get("torch_compile")) and (year, month) >= (2025, 4)
        plan["cross_entropy"] = "fused" if compiled else "eager"
        assumed.append(f"loss {plan['cross_entropy']}: torch.compile {'on' if row['training'].get('torch_compile') else 'off'} "
                       f"at torchtitan of {year}-{month:02d}, which compiles the loss with the model from 2025-04")
        # Compiled, the model's norms, SwiGLU and rotary embeddings are fused; uncompiled, they run
        # as PyTorch primitives (models/llama/model.py, norms.py RMSNorm), but for a fused_rmsnorm config.
        if row["training"].get("torch_compile"):
            plan["elementwise_kernels"] = "fused"
        elif row["model"]["arch_key"] in TORCHTITAN_A100_NORM and "A100" in row["hardware"]["chip"]:
            norm = TORCHTITAN_A100_NORM[row["model"]["arch_key"]]
            plan["elementwise_kernels"] = "eager-fused-norm" if norm == "fused_rmsnorm" else "eager"
            assumed.append(f"elementwise_kernels {plan['elementwise_kernels']}: uncompiled (compile = false) with norm_type {norm} in the "
                           "train config of the April 2024 A100 table (1ea476e9f, 395a52627)")
        else:
            plan["elementwise_kernels"] = "eager"
            assumed.append("elementwise_kernels eager: torch.compile off, so its RMSNorm, SwiGLU and rotary embeddings run as PyTorch "
                           "primitives (norm_type rmsnorm in the train config of the run's date)")
        # Its Llama attention repeated each K/V head to its query heads before SDPA
        # (models/llama/model.py repeat_kv at 9dec370) until #2259 of 2026-01.
        config = row["model"]["config"]
        heads = config.get("num_attention_heads") or 0
        if (year, month) < (2026, 1) and (config.get("num_key_value_heads") or heads) < heads:  # no key: as many K/V heads
            plan["repeat_kv"] = True
            assumed.append(f"repeat_kv: torchtitan of {year}-{month:02d} repeats K/V to every query head before SDPA (until #2259, 2026-01)")
        if cp > 1:
            # PyTorch's context parallel all-gathers K/V by default (_RotateMethod.ALL_GATHER).
            plan["context_kv"] = "all-gather"
            assumed.append("context_kv all-gather: PyTorch's context parallel default rotate method, which torchtitan keeps")
        if plan.get("fp8_recipe") == "tensorwise" and plan["zero_stage"] >= 1:
            # torchao's per-tensor Float8Linear casts FSDP2's weight all-gathers to FP8
            # (enable_fsdp_float8_all_gather). Published where a run lists its options; else the
            # launch command of torchtitan's docs/float8.md (at 9dec370 for 2024, 820504e2 for June
            # 2025) and, for 405B, train_configs/llama3_405b.toml from 9515a140b (the commit that
            # published its Float8 numbers) on.
            plan["param_gather_dtype"] = "fp8"
            if "enable_fsdp_float8_all_gather" not in row["training"].get("float8_options", ""):
                assumed.append("FP8 weight gathers (enable_fsdp_float8_all_gather): the launch command of torchtitan's docs/float8.md "
                               "of the run's date" + (" and the 405B preset (train_configs/llama3_405b.toml from 9515a140b)"
                                                      if "405b" in row["model"]["arch_key"] else ""))
        if plan.get("fp8_recipe") == "tensorwise" and tp > 1:
            # parallelize_llama.py applies torchao's Float8ColwiseParallel / Float8RowwiseParallel
            # / PrepareFloat8ModuleInput with per-tensor Float8 (at 3faaa1a0d and 9dec370;
            # enable_float8_tensorwise_tp at 820504e2, June 2025): the sequence-parallel gathers
            # move FP8 (docs/float8.md: "float8 all-gather ... for TP (by default for
            # Float8Linear)"). The profiled commit runs row-wise only, which gathers 16 bits.
            plan["tensor_gather_dtype"] = "fp8"
            assumed.append(f"FP8 sequence-parallel gathers (tensor_gather_dtype fp8): torchao's Float8ColwiseParallel, which "
                           f"torchtitan of {year}-{month:02d} applies with per-tensor Float8 (parallelize_llama.py)")
        framework = "torchtitan"
    elif fam == "nemo_automodel":
        fsdp = par.get("fsdp_published") or dp
        if par.get("ep") is None and row["id"] in AUTOMODEL_EP:
            ep = AUTOMODEL_EP[row["id"]]
            commit, yaml = AUTOMODEL_CONFIG[row["id"]]
            assumed.append(f"expert parallelism {ep}: ep_size in {yaml} at NVIDIA-NeMo/Automodel@{commit}, the row's configuration (the table leaves EP blank)")
        if ep > 1:
            assumed.append(f"expert parallelism {ep} laid over the FSDP ranks: mesh fsdp {fsdp // ep} x expert {ep} (its FSDP2 shards the dense weights over all of these ranks: the expert axis is one of their ZeRO-3 replica axes)")
        mesh.update(fsdp=fsdp // ep, expert=ep, data=dp // fsdp)
        plan["zero_stage"] = 3
        if row["training"]["recompute"] is None and row["id"] in AUTOMODEL_AC:
            ac = AUTOMODEL_AC[row["id"]]
            commit, yaml = AUTOMODEL_CONFIG[row["id"]]
            plan["recompute"] = "full" if ac else "none"
            assumed.append(f"recompute {plan['recompute']}: activation_checkpointing {AC_WORDS[ac]} in "
                           f"{yaml} at NVIDIA-NeMo/Automodel@{commit}, the row's configuration (not published in the table)")
        else:
            plan["recompute"] = recompute_of(row["training"]["recompute"], assumed, "none", fam)
        # NeMoAutoModelForCausalLM.from_config makes the model in torch_dtype, "auto" meaning
        # bfloat16 (nemo_automodel/_transformers/auto_model.py), and the benchmark configs set no
        # other: bf16 weights, FSDP2's reduced gradients cast back to them, torch.optim.Adam's
        # state in their dtype (components/distributed/config.py: "Pair with model.torch_dtype:
        # float32 for fp32 optimizer state").
        plan["master_weights"] = "bf16"
        assumed.append("master_weights bf16: NeMoAutoModelForCausalLM makes the model in bfloat16 (torch_dtype auto) and torch.optim.Adam keeps its state "
                       "in the weights' dtype (torchtitan, whose behaviours cost the run otherwise, keeps fp32 weights: a gap bypassed)")
        if "flexattn" in (row["training"].get("kernel_optimizations") or "").lower():
            plan["attention_kernel"] = "flex"
            assumed.append("attention_kernel flex: the table's kernel optimizations name FlexAttn (PyTorch's FlexAttention)")
        if ep > 1 and "deepep" in (row["training"].get("kernel_optimizations") or "").lower():
            # DeepEP's normal kernels: each token once per destination node and GPU.
            plan["ep_dispatcher"] = "deepep"
            assumed.append("DeepEP dispatch (the row's kernel optimizations): each token sent once per destination node and GPU")
        if row["id"] in AUTOMODEL_FAKE_GATE:
            commit, yaml = AUTOMODEL_CONFIG[row["id"]]
            plan["expert_routing"] = "round-robin"
            assumed.append(f"expert_routing round-robin: fake_balanced_gate true in {yaml} at NVIDIA-NeMo/Automodel@{commit} "
                           "(components/moe/layers.py FakeBalancedGate: token t to experts t·k ... t·k + k - 1 mod E)")
        # The table's GA under pipeline parallelism: recipes/llm/train_ft.py calls the schedule's
        # step() once per accumulation step over LBS sequences; its MoE models reduce gradients
        # once, after the last (components/moe/fsdp_mixin.py: get_is_optim_step).
        ga = row["batch"].get("grad_accum_automodel") or 1
        if par.get("pp", 1) > 1 and ga > 1:
            plan["pipeline_rounds"] = ga
            assumed.append(f"pipeline_rounds {ga}: the table's GA, each accumulation step one pipeline schedule of LBS "
                           f"{row['batch'].get('local_batch_size')} sequences (recipes/llm/train_ft.py), gradients reduced after the last (fsdp_mixin.py)")
        framework = "torchtitan"
        assumed.append("PyTorch FSDP2 (NeMo AutoModel) costed as torchtitan")
        plan["elementwise_kernels"] = "fused"
        assumed.append("elementwise_kernels fused: Transformer Engine's norms and attention (backend rms_norm and attn te in the row's configuration)")
        if row["model"]["config"].get("model_type") == "nemotron_h":
            assumed.append("AutoModel's own Nemotron-H model code: torchtitan trains no Mamba layers (a gap its profile names), its other behaviours cost the run")
            if row["id"] in AUTOMODEL_MTP:
                modules, layers, shared = AUTOMODEL_MTP[row["id"]]
                commit, yaml = AUTOMODEL_CONFIG[row["id"]]
                assumed.append(f"{modules} multi-token-prediction modules of layers {layers}"
                               f"{', one module' + chr(39) + 's weights at every depth' if shared else ''}: num_nextn_predict_layers {modules}"
                               f"{' and mtp_use_repeated_layer true' if shared else ''} in {yaml} at NVIDIA-NeMo/Automodel@{commit} "
                               "(components/models/nemotron_v3/mtp.py)")
            elif NEMOTRON_H[row["model"]["arch_key"]]["moe"].get("latent_size"):
                assumed.append("no multi-token-prediction layers trained (not published)")
    else:  # NeMo (Megatron-core)
        e = ep
        if ep > 1 and dp % ep:
            # Megatron-core's MoE parallel folding (core/parallel_state.py: the expert grid, order
            # tp-ep-dp-pp, over the ranks of tp-cp-dp) lays these runs' experts over the tensor and
            # context ranks. NeMo's configuration for them (scripts/performance/
            # recommended_model_configs/model_configs_b200.csv: mixtral 8x22b, tp 2, cp 8, ep 8,
            # etp_size 1) folds 8 over tensor 2 x 4 of the 8 context ranks: part of an axis, which
            # expert_axes (whole axes) cannot name.
            raise Skip(f"expert parallelism {ep} over {dp} data-parallel ranks: Megatron-core folds it over the tensor and part of "
                       f"the context ranks (NeMo's configuration of this run on B200 sets expert tensor size 1), which whole-axis expert_axes cannot name")
        if par.get("fsdp_published") == 1:
            mesh.update(fsdp=dp // e, expert=e)
            plan["zero_stage"] = 3
        else:
            mesh.update(data=dp // e, expert=e)
            plan["zero_stage"] = 1
            assumed.append("distributed optimizer (ZeRO-1) as NeMo's recipes enable it")
        if tp > 1:
            plan["sequence_parallel"] = True
            assumed.append("sequence parallelism with tensor parallelism, as NeMo's recipes enable it")
            release = row["id"].split("-")[0]
            if release == "nemo2407" and row["model"]["arch_key"] in NEMO2407_TP_OVERLAP:
                config, on = NEMO2407_TP_OVERLAP[row["model"]["arch_key"]]
                plan["overlap"] = {"tensor": on}
                assumed.append(f"overlap.tensor {'on' if on else 'off'}: ub_tp_comm_overlap {on} in NeMo-Framework-Launcher's "
                               f"launcher_scripts/conf/training/{config}")
            elif release == "nemo2407":
                raise Skip("tensor-parallel communication overlap of this 24.07 configuration not read (NEMO2407_TP_OVERLAP)")
            elif release in NEMO2_RELEASES:
                tag = NEMO2_RELEASES[release]
                on = not (tag == "v2.3.0" and par.get("fsdp_published") == 1)
                plan["overlap"] = {"tensor": on}
                assumed.append(f"overlap.tensor {'on' if on else 'off'}: " +
                               (f"NeMo {tag}'s performance recipes add MegatronCommOverlapCallback(tp_comm_overlap=True)" if on else
                                f"NeMo {tag}'s scripts/performance/utils.py turns tp_comm_overlap off under Megatron FSDP"))
        offload = NEMO_OFFLOAD.get((row["model"]["arch_key"], "GB200" in row["hardware"]["system"], tp, pp, par.get("cp") or 1,
                                    par.get("fsdp_published") == 1, plan["dtype"]))
        if offload and row["training"]["recompute"] is None:
            # NeMo's recommended configuration of the same parallelism offloads instead of recomputing.
            plan["recompute"] = "none"
            plan["offload_layers"] = offload
            assumed.append(f"recompute none and offload_layers {offload} (activation_offload_layers; recompute_layers 0): NeMo's "
                           f"configuration of this parallelism, {NEMO_OFFLOAD_SOURCE} (its global batch 256 where the table says 64)")
        else:
            plan["recompute"] = recompute_of(row["training"]["recompute"], assumed, "none", fam)
        # NeMo's performance recipes (performance_mode) set grad_reduce_in_fp32 = False.
        plan["grad_reduce_dtype"] = "bf16"
        assumed.append("gradient reductions in bf16, as NeMo's performance recipes set (grad_reduce_in_fp32 False)")
        # NeMo 2.0's FP8 recipes (nemo/collections/llm/recipes/precision/mixed_precision.py: fp8_params
        # from 2024-09, fp8_param_gather from 2025-04) keep FP8 weights, gathered in FP8, for delayed
        # and current per-tensor scaling and MXFP8 (all but blockwise, which no row publishes);
        # scripts/performance/helpers.py set_precision_configs picks them. NeMo 1.0's launcher rows
        # (containers 24.xx) publish no such setting and keep 16-bit gathers.
        release = re.match(r"NeMo(?: container)? (\d+)\.", row["source"].get("release", ""))
        if plan["dtype"] == "fp8" and release and int(release.group(1)) >= 25 and plan["zero_stage"] >= 1:
            plan["param_gather_dtype"] = "fp8"
            assumed.append("FP8 weight gathers (--fp8-param-gather), as NeMo 2.0's FP8 recipes set")
        framework = "megatron-core"
    if ep > 1 and dp % ep:
        raise Skip("expert degree does not divide the data-parallel ranks")
    if pp > 1:
        vp = par.get("vp") or 1
        sched = (par.get("pp_schedule") or "").lower()
        if vp > 1 or "interleaved" in sched:
            plan["pipeline_schedule"] = "interleaved-1f1b"
            if vp == 1:
                vp = 2
                assumed.append("interleaved 1F1B with 2 chunks per stage (chunks not published)")
            plan["virtual_stages"] = vp
            if fam == "nemo_automodel":
                automodel_pipeline(row["id"], row["model"]["config"]["num_hidden_layers"], pp, vp, plan, assumed)
        else:
            plan["pipeline_schedule"] = "1f1b"
        if mbs is None:
            replicas = n // (tp * pp * cp)
            local = gbs // replicas
            mbs = max(1, local // pp)
            assumed.append(f"micro-batch {mbs}: torchtitan's default of as many micro-batches as stages")
        if fam == "torchtitan" and run_date(row) < (2025, 5):
            # torch.distributed.pipelining kept every stage's output of every micro-batch to the
            # end of the step (stage.py output_chunks) until pytorch/pytorch#153383 (2025-05).
            plan["pipeline_buffers"] = "keep-outputs"
            assumed.append("pipeline_buffers keep-outputs: torch.distributed.pipelining before pytorch/pytorch#153383 (2025-05) "
                           "kept every micro-batch's stage output, the last stage's logits, to the end of the step "
                           "(and, before #164329, each input buffer's gradient to the next step)")
    if mbs is None:
        raise Skip("micro-batch size not published")
    plan["micro_batch_size"] = mbs
    plan["mesh"] = {k: v for k, v in mesh.items() if v != 1}
    if not plan["mesh"]:
        plan["mesh"] = {"data": 1}
    return plan, framework


def measured_of(row):
    m, b, n = row["metrics"], row["batch"], row["hardware"]["num_devices"]
    tokens = b["gbs"] * b["seq_len"]
    if any(m.get(k) is not None and (not isinstance(m[k], (int, float)) or not 0 <= m[k] < float("inf"))
           for k in ("step_time_s", "tokens_per_sec_per_gpu", "tokens_per_sec_per_chip_derived")):
        raise Skip("a negative, infinite, NaN or non-numeric step time or throughput")
    if m.get("step_time_s"):
        return {"step_time_s": m["step_time_s"], "what": "time per global step (published)"}
    if m.get("tokens_per_sec_per_gpu"):
        return {"step_time_s": tokens / (m["tokens_per_sec_per_gpu"] * n), "what": f"tokens/s per device {m['tokens_per_sec_per_gpu']} (published)"}
    if m.get("tokens_per_sec_per_chip_derived"):
        return {"step_time_s": tokens / (m["tokens_per_sec_per_chip_derived"] * n),
                "what": f"TFLOP/s per chip {m['model_tflops_per_gpu']} (published) under the source's own FLOP count"}
    raise Skip("no throughput or step time published")


def main(src, dst):
    rows, beyond, runs, skipped = json.load(open(src)), set(), [], []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs_beyond_shared", "*.json"))):
        extra = json.load(open(path))["runs"]
        beyond.update(r["id"] for r in extra)
        rows = rows + extra
    for row in rows:
        assumed = []
        try:
            if row.get("flags"):
                raise Skip("flagged by the collector: " + "; ".join(row["flags"]))
            model = model_of(row)
            if row["id"] in AUTOMODEL_MTP:  # the modules the row's configuration trains (plan_of says so)
                modules, layers, shared = AUTOMODEL_MTP[row["id"]]
                model.update(mtp_layers=modules, mtp_pattern=layers,
                             source=model["source"].replace("; its multi-token-prediction layers left out", "") +
                             "; its multi-token-prediction modules as the run's configuration trains them (see assumed)")
                if shared:
                    model["mtp_shared_weights"] = True
            cluster = cluster_of(row)
            plan, framework = plan_of(row, assumed)
            run = {"id": row["id"], "source_family": row["source_family"], "source": row["source"]["ref"],
                   "model": model, "cluster": cluster, "plan": plan, "framework": framework,
                   "published_precision": row["training"]["precision_as_published"], "measured": measured_of(row), "assumed": assumed,
                   "_type": row["model"]["config"].get("model_type"), "_beyond": row["id"] in beyond}
        except Skip as e:
            skipped.append({"id": row["id"], "why": str(e)})
            continue
        except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:  # a row not in the collected format
            skipped.append({"id": str(row.get("id", "?")) if isinstance(row, dict) else "?", "why": f"malformed row: {type(e).__name__} {e}"})
            continue
        if row["metrics"].get("peak_memory_gib"):
            run["peak_memory_gib"] = row["metrics"]["peak_memory_gib"]
            run["memory_metric"] = row["metrics"].get("memory_metric", "")
        runs.append(run)
    groups = {}
    for run in runs:
        groups.setdefault((run["source_family"], run["cluster"].split(":")[0]), []).append(run)
    for group in groups.values():
        drawn = [r for r in group if r["_type"] not in TEST_ONLY_TYPES and not r["_beyond"]]
        for i, run in enumerate(sorted(drawn, key=lambda r: r["id"])):
            run["split"] = "fit" if i % 2 == 0 else "test"
        for run in group:
            run.setdefault("split", "test")
            del run["_type"], run["_beyond"]
    out = {"_about": "Published measured training runs in shardsim's runs format (docs/accuracy.md), imported by "
                     "scripts/import_measured_runs.py from a hand-collected set (each row's `source` names the repository@commit:path "
                     "or page its figures come from). `assumed` lists what the source does not publish and how it was filled; "
                     "`split` says whether calibrate fits on the row or only tests on it (alternate rows by id within each "
                     "source and system; rows of model types imported after the split was drawn, gpt_oss and nemotron_h, and the rows "
                     "of scripts/runs_beyond_shared/, published runs the hand-collected set does not hold, only test).",
           "runs": runs, "skipped": skipped}
    # One run (and one skipped row) per line: a diff shows which runs changed.
    with open(dst, "w") as f:
        f.write("{\"_about\": " + json.dumps(out["_about"]) + ",\n")
        for key in ("runs", "skipped"):
            rows = ",\n".join(" " + json.dumps(row, separators=(",", ":")) for row in out[key])
            f.write(f"\"{key}\": [\n{rows}\n]" + (",\n" if key == "runs" else "\n"))
        f.write("}\n")
    print(f"{len(runs)} runs, {len(skipped)} skipped", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
