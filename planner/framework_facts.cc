#include "planner/framework_facts.h"

#include "strategies/schedule.h"

namespace shardsim::planner {
namespace {

using enum MeshAxis;
constexpr OverlapRule kSw = OverlapRule::kSwitch, kOn = OverlapRule::kAlways,
                      kOff = OverlapRule::kNever;

// One row per framework, in Framework's order. Sources are paths in each repository at the commit
// named in `source`; docs/frameworks.md says the same in prose.
constexpr std::array<FrameworkFacts, 4> kFrameworks = {{
    {
        .framework = Framework::kMegatronCore,
        .name = "megatron-core",
        .source = "NVIDIA/Megatron-LM d98e8a64",
        // megatron/core/parallel_state.py: order="tp-cp-ep-dp-pp", tensor fastest; HSDP's outer
        // replicas (--num-distributed-optimizer-instances) are the outer part of dp.
        .mesh_order = {kPipeline, kData, kFsdp, kExpert, kContext, kTensor},
        .mesh_order_text = "Megatron-core orders ranks tp-cp-ep-dp-pp (tensor fastest)",
        // megatron/training/arguments.py: --use-distributed-optimizer (ZeRO-1 over dp x cp);
        // --use-megatron-fsdp with --data-parallel-sharding-strategy optim_grads (ZeRO-2) or
        // optim_grads_params (ZeRO-3), --num-distributed-optimizer-instances and
        // --outer-dp-sharding-strategy {no_shard, optim} for HSDP. Megatron-FSDP v1 has no
        // pipeline assertion there (only Torch-FSDP2 asserts pipeline and expert size 1).
        .sharding = ShardingFamily::kZeroOverAll,
        // Megatron-FSDP frees gathered parameters after each unit's forward (no option keeps them;
        // --torch-fsdp2-no-reshard-after-forward is Torch-FSDP2's, which refuses pipelines).
        .keep_gathered = KeepGathered::kNever,
        .max_zero_with_pipeline = 3,
        .fsdp_with_pipeline = true,
        .sequence_parallel_on = true,
        .sequence_parallel_off = true,
        .tensor_with_pipeline = true,
        // --cp-comm-type p2p (ring) or all_gather (TransformerConfig.cp_comm_type, passed to
        // Transformer Engine's DotProductAttention).
        .ring_context = true,
        .all_gather_context = true,
        // arguments.py: expert_tensor_parallel_size defaults to tensor_model_parallel_size.
        .experts_split_over_tensor = true,
        // core/parallel_state.py: the expert grid (order tp-ep-dp-pp) over the ranks of tp-cp-dp
        // puts expert parallelism on the context ranks first: experts beside context ranks only
        // folded over them (expert_axes with context).
        .expert_with_context = false,
        .expert_capacity = true,          // --moe-expert-capacity-factor
        // --recompute-granularity selective (core_attn) / full.
        .recompute = {true, true, true, false, false, false},
        .bf16 = true, .fp16 = true, .fp8 = true,
        .fp32 = true,               // --bf16, --fp16, --fp8-format hybrid
        .unfused_attention = true,  // --attention-backend unfused
        .repeated_kv = false,       // its attention backends take grouped K/V heads
        .offload = OffloadRule::kFirstLayers,  // transformer_config.py: cpu_offloading_num_layers < num_layers, no pipeline, no recomputation
        .layout = LayoutRule::kAny,  // --pipeline-model-parallel-layout
        .microbatches_multiple_of_stages = false,
        // schedules.py: forward_backward_pipelining_* runs get_num_microbatches() in one schedule.
        .pipeline_rounds = RoundsRule::kOneSchedule,
        // --overlap-grad-reduce / --overlap-param-gather (one pair for data and fsdp),
        // --tp-comm-overlap (asserts --sequence-parallel), --moe-shared-expert-overlap (the
        // all-to-all under the shared experts, as shardsim's overlap.expert).
        .overlap = {kSw, kSw, kSw, kOn, kSw, kSw},
        // arguments.py turns overlap_p2p_comm off for the non-interleaved schedule; interleaved
        // overlaps by default (--no-overlap-p2p-communication turns it off).
        .pipeline_overlap_one_chunk = kOff,
        .pipeline_overlap_interleaved = kSw,
        // TransformerConfig.cp_comm_type: "p2p" overlaps with attention, "all_gather" is not
        // async and cannot be overlapped.
        .context_overlap_ring = kOn,
        .context_overlap_all_gather = kOff,
        .one_switch_data_fsdp = true,
        .reduces_after_pipeline_drains = false,
        .tensor_overlap_needs_sequence_parallel = true,
        // arguments.py: under --bf16, accumulate_allreduce_grads_in_fp32 is set when main grads
        // are fp32 (the default) and --grad-reduce-in-bf16 clears it (training.py passes it to
        // DDP as grad_reduce_in_fp32); under --fp16 only --accumulate-allreduce-grads-in-fp32
        // sets it. Megatron-FSDP reads neither: --megatron-fsdp-grad-comm-dtype, default "auto",
        // the parameters' dtype.
        .grad_reduce = GradReduceRule::kMegatron,
        .flop_count = FlopCount::kCausalAttention,
        .flop_count_source = "megatron/training/training.py num_floating_point_operations (core attention / 2 for the causal mask)",
        // core/tensor_parallel/cross_entropy.py vocab_parallel_cross_entropy: the fp32 logits
        // turned into the softmax in place and saved for the backward.
        .fused_cross_entropy = true,
        .eager_cross_entropy = false,
        .cross_entropy_default = "fused",
        // Transformer Engine's (or Apex's) fused norm, SwiGLU and RoPE kernels.
        .fused_elementwise = true,
        .eager_elementwise = false,
        .elementwise_default = "fused",
        // core/enums.py Fp8Recipe: delayed and tensorwise (per-tensor scales), blockwise, mxfp8
        // (--fp8-recipe; delayed by default); nvfp4 by --fp4-format e2m1 (Fp4Recipe, TE >= 2.7).
        .fp8_recipes = {true, false, true, true, true},
        .fp8_recipe_default = "tensorwise",
        // core/transformer/transformer_config.py moe_dispatch_fwd_dtype / moe_combine_bwd_dtype:
        // 'bf16' or 'mxfp8', with the 'ncclep' flex dispatcher only (fused_a2a.py's DeepEP path
        // keeps fp8_dispatch off).
        .fp8_dispatch_recipe = "mxfp8",
        // Transformer Engine's Linear, LayerNormLinear, LayerNormMLP and GroupedLinear keep the
        // quantised (column-wise) copy of their input for the backward (pytorch/module/linear.py:
        // update_usage(rowwise_usage=False, columnwise_usage=True)); Megatron-core keeps the
        // original where another op saves it already (set_save_original_input).
        .saved_input_dtype = "fp8",
        // transformer/module.py set_is_first_microbatch, called at each step's first micro-batch:
        // Transformer Engine's modules keep the FP8 weight (and its transpose) for the others.
        .fp8_weight_casts = "per-step",
        // training/arguments.py --fp8-param-gather: FP8 weights, gathered so by the distributed
        // optimizer or FSDP (required); off by default, on in NeMo 2.0's FP8 recipes
        // (recipes/precision/mixed_precision.py, all but blockwise).
        .fp8_param_gather = true,
        // Transformer Engine quantises a column-parallel product's input before the
        // sequence-parallel all-gather (pytorch/module/layernorm_linear.py: the norm writes FP8,
        // gather_along_first_dim moves it; linear.py: the backward gathers the quantised output
        // gradient; distributed.py gathers each recipe's quantised tensors).
        .fp8_tensor_gather = true,
        // transformer_config.py: moe_token_dispatcher_type 'flex' with moe_flex_dispatcher_backend
        // 'deepep' (its default; moe_enable_deepep is the deprecated spelling).
        .deepep_setting = "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep",
        // --moe-router-force-load-balancing draws random logits (transformer/moe/router.py
        // apply_random_logits), routed as scores are: uniform routing, not round-robin.
        .round_robin_setting = "",
        .mamba_layers = true,  // pretrain_mamba.py: --hybrid-layer-pattern (core/ssm/mamba_block.py)
        .moe_latent = true,    // --moe-latent-size (transformer/moe/moe_layer.py fc1_latent_proj)
        // core/parallel_state.py: the expert grid (expert tensor x expert x expert data, order
        // tp-ep-dp-pp) over the same ranks as tensor x context x data, so
        // --expert-model-parallel-size may exceed the data-parallel ranks and
        // --expert-tensor-parallel-size differ from tensor (MoE parallel folding).
        .moe_folding = true,
        // tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication saves the
        // shard and all-gathers it again in the backward (Transformer Engine's modules alike).
        .sequence_parallel_inputs = "regather",
        // pipeline_parallel/p2p_communication.py _communicate makes each receive buffer with
        // torch.empty for that transfer; schedules.py deallocate_output_tensor frees a stage's
        // output once sent (deallocate_pipeline_outputs, which training/argument_utils.py sets).
        .pipeline_buffers = "per-transfer",
        // --tp-comm-overlap: Transformer Engine's userbuffers pipeline each forward all-gather and
        // reduce-scatter with its GEMM (tp_comm_overlap_ag / _rs, model_parallel_config.py) and run
        // the backward's in bulk beside the other gradient GEMM (tp_comm_bulk_dgrad / _wgrad;
        // tp_comm_overlap_rs_dgrad is off); linear_qkv and linear_fc1 (gate and up) are one
        // product each, so no region's collective is left out.
        .tensor_overlap_scope = "all",
        .mtp_setting = "--mtp-num-layers",
        // transformer_config.py mtp_use_repeated_layer: one MTP layer object called at every depth.
        .mtp_shared_setting = "--mtp-use-repeated-layer",
        .flex_attention_setting = "",  // --attention-backend: flash, fused, unfused, local (Transformer Engine's)
        // --bf16: the distributed optimizer keeps fp32 main parameters beside the model's bf16
        // ones (optimizer/distrib_optimizer.py, main_params_dtype fp32 by default), Adam's state
        // in fp32, gradients in main_grad buffers at the reduction's width.
        .master_weights = "fp32-copy",
        .memory_allocator = "caching",  // PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp)
        .wgrad_bf16_recipe = "",  // --no-fp8-wgrad sets DelayedScaling's override_linear_precision, gone in TE 2.0
        .sixteen_bit_layers_setting = "--first-last-layers-bf16",  // fp8_utils.py is_first_last_bf16_layer (global layer numbers)
    },
    {
        .framework = Framework::kTorchtitan,
        .name = "torchtitan",
        .source = "pytorch/torchtitan b5bcd76c",
        // torchtitan/distributed/parallel_dims.py: world mesh pp, dp_replicate, dp_shard, cp, tp;
        // expert parallelism takes the innermost ranks of dp_shard x cp x tp (efsdp, ep).
        .mesh_order = {kPipeline, kData, kFsdp, kExpert, kContext, kTensor},
        .mesh_order_text = "torchtitan builds its mesh as pp, dp_replicate, dp_shard, cp, tp",
        // parallel_dims.py: the fsdp mesh is dp_shard x cp ("when cp is used, FSDP is also
        // applied"); config/configs.py data_parallel_replicate_degree: HSDP or DDP.
        .sharding = ShardingFamily::kFsdpOverShard,
        .keep_gathered = KeepGathered::kSwitch,  // parallelism.fsdp_reshard_after_forward
        .max_zero_with_pipeline = 3,
        .fsdp_with_pipeline = true,
        .sequence_parallel_on = true,  // parallelism.enable_sequence_parallel (default true)
        .sequence_parallel_off = true,
        .tensor_with_pipeline = true,
        // PyTorch's context parallel all-gathers the K/V shards (its rotate method; torchtitan
        // dropped context_parallel_rotate_method in #3666 and keeps PyTorch's default).
        .ring_context = false,
        .all_gather_context = true,
        // configs.py expert_parallel_degree: EP borrows ranks from FSDP and TP, experts are not
        // tensor-split; with cp > 1 it borrows context ranks too.
        .experts_split_over_tensor = false,
        .expert_with_context = false,
        .expert_capacity = false,  // dropless token-choice MoE
        // distributed/activation_checkpoint.py: none, full (FullAC) or SelectiveAC, the op-level
        // policy that recomputes every second matmul (selective-op). The per-layer option
        // (selective_ac_option "2") is gone at this commit.
        .recompute = {true, false, true, true, false, false},
        // configs.py training.mixed_precision_param bfloat16/float32; float8 through the
        // Float8LinearConverter model converter (components/quantization/float8.py); no fp16.
        .bf16 = true, .fp16 = false, .fp8 = true,
        .fp32 = true,
        .unfused_attention = false,  // the models' attention backends are sdpa or flex
        // models/common/attention.py: enable_gqa since #2259 (2026-01); before, repeat_kv.
        .repeated_kv = false,
        .offload = OffloadRule::kNone,         // config/configs.py: enable_cpu_offload moves FSDP's parameters, gradients and optimizer state, not activations
        .layout = LayoutRule::kAny,  // parallelism.module_fqns_per_model_part
        .microbatches_multiple_of_stages = false,
        // trainer.py: each of gradient_accumulation_steps calls pp_schedule.step() over
        // num_pp_microbatches micro-batches; torch.distributed.pipelining's stage.py reduces FSDP's
        // gradients at each step()'s last backward (backward_maybe_with_nosync, last_backward).
        .pipeline_rounds = RoundsRule::kReducedEachRound,
        // FSDP2 prefetches and replicate() buckets under backward; async TP is
        // compile.enable_async_tensor_parallel; pipelining sends asynchronously; no all-to-all
        // overlap in the default MoE.
        .overlap = {kOn, kOn, kSw, kOn, kOn, kOff},
        .pipeline_overlap_one_chunk = kOn,
        .pipeline_overlap_interleaved = kOn,
        .context_overlap_ring = kOn,
        .context_overlap_all_gather = kOn,  // under the attention's local block (OverlapPartner)
        .one_switch_data_fsdp = false,
        .reduces_after_pipeline_drains = false,
        .tensor_overlap_needs_sequence_parallel = false,
        // torchtitan/config/configs.py: mixed_precision_reduce: Literal["float32"] (FSDP2's
        // reduce dtype; DDP reduces the fp32 parameters' gradients).
        .grad_reduce = GradReduceRule::kFp32,
        .flop_count = FlopCount::kFullAttention,
        .flop_count_source = "torchtitan/models/utils.py get_dense_model_nparams_and_flops (no causal sparsity)",
        // components/loss.py cross_entropy_loss: F.cross_entropy(pred.float(), ...), compiled
        // (fused) only when compile.enable and "loss" in compile.components (_maybe_compile;
        // compile.enable defaults to False). Before April 2025 (#1033) the loss was never compiled.
        .fused_cross_entropy = true,
        .eager_cross_entropy = true,
        .cross_entropy_default = "eager",
        // models/llama3/model: RMSNorm, SwiGLU and RoPE in PyTorch primitives, fused only where
        // compile.enable and "model" in compile.components (compile.enable defaults to False).
        .fused_elementwise = true,
        .eager_elementwise = true,
        .elementwise_default = "eager",
        // components/quantization/float8.py Float8LinearConverter: recipe_name "rowwise" (or
        // "rowwise_with_gw_hp"), per-tensor scaling gone; mx.py MXFP8LinearConverter: mxfp8.
        // nvfp4: components/quantization/nvfp4.py NVFP4LinearConverter (experimental, #3914).
        .fp8_recipes = {false, true, false, true, true},
        .fp8_recipe_default = "rowwise",
        .fp8_dispatch_recipe = "",  // its expert all-to-alls move the activations as they are
        // torchao float8_linear.py matmul_with_hp_or_float8_args: save_for_backward(input_hp, ...).
        .saved_input_dtype = "bf16",
        // It casts the 16-bit weight in each forward, and again in the backward (no cache).
        .fp8_weight_casts = "per-microbatch",
        // FSDP2's FP8 all-gather was torchao's per-tensor option (Float8LinearConfig
        // enable_fsdp_float8_all_gather); the row-wise converter has none.
        .fp8_param_gather = false,
        // docs/float8.md: "For float8 with rowwise scaling, all distributed communication is done
        // in high precision" (per-tensor scaling gathered FP8 through torchao's
        // Float8ColwiseParallel, which today's converters no longer offer).
        .fp8_tensor_gather = false,
        // models/*/__init__.py model_registry(flavor, moe_comm_backend="deepep"):
        // models/common/token_dispatcher.py DeepEPTokenDispatcher.
        .deepep_setting = "model_registry(..., moe_comm_backend=\"deepep\")",
        // config/configs.py DebugConfig.moe_force_load_balance: models/common/moe.py
        // _debug_force_load_balance_routing, arange(tokens x k) % experts.
        .round_robin_setting = "config.debug.moe_force_load_balance = True",
        .mamba_layers = false,  // its models (llama3, qwen3, deepseek_v3, ...) have no state-space layers
        .moe_latent = false,
        .moe_folding = false,
        // models/common/decoder_sharding.py: the attention's and the FFN's input is redistributed
        // from the sequence shard to Replicate at the module boundary (in_dst_shardings), and
        // the column-parallel matmuls save that gathered tensor for their backward.
        .sequence_parallel_inputs = "keep-gathered",
        // torch.distributed.pipelining's stage.py: _prepare_forward_infra and
        // _prepare_backward_infra make a receive buffer for every micro-batch's input and output
        // gradient, kept across steps; fwd_cache keeps each micro-batch's output to its
        // backward. trainer.py steps the schedule with return_outputs=False, so the last stage
        // keeps no outputs to the step's end (torchtitan of 2024 did: keep-outputs).
        .pipeline_buffers = "per-microbatch",
        // Async TP is torch's micro_pipeline_tp_pass (torch/_inductor/fx_passes/
        // micro_pipeline_tp.py): fuse_matmul_reduce_scatter needs the reduce-scatter's input to
        // be one matmul's output (_find_producer_matmul, in 2024's torch as now), and the
        // models' wq / wk / wv and w1 / w3 are separate Linears, so the backward's input gradients
        // of attention and of the gated MLP are sums of products, reduced blocking. All-gathers
        // fuse with every matmul reading them (fused_all_gather_matmul takes a list), except
        // row-wise FP8 scaled ones (pytorch/pytorch#149990, open since 2025-03).
        .tensor_overlap_scope = "single-product",
        // models/deepseek_v3: MTP layers come from the model registry's num_mtp_layers (only its
        // debug flavour sets it), not from the job config.
        .mtp_setting = "",
        // models/common/config_utils.py get_attention_config: "flex" (FlexAttention), else SDPA.
        .flex_attention_setting = "model_registry(..., attn_backend=\"flex\")",
        // The model is made in fp32 and FSDP2's MixedPrecisionPolicy casts to
        // training.mixed_precision_param (bf16) for compute only (distributed/fsdp.py): the fp32
        // shards are the master, their gradients fp32, AdamW's state fp32.
        .master_weights = "fp32",
        .memory_allocator = "caching",  // components/metrics.py reports its reserved_bytes.all.peak
        .wgrad_bf16_recipe = "rowwise",  // Float8LinearConverter.Config(recipe_name="rowwise_with_gw_hp")
        .sixteen_bit_layers_setting = "the converters' fqns",  // quantization/nvfp4.py nvfp4_bf16_tail_fqns: "layers.N." per layer
    },
    {
        .framework = Framework::kMaxText,
        .name = "maxtext",
        .source = "AI-Hypercomputer/maxtext e591f30c",
        // src/maxtext/configs/base.yml mesh_axes: data, stage, fsdp, ..., context, ..., tensor,
        // ..., expert (DCN axes outside all ICI axes).
        .mesh_order = {kData, kPipeline, kFsdp, kContext, kTensor, kExpert},
        .mesh_order_text = "MaxText's mesh_axes run data, stage, fsdp, context, tensor, expert",
        // base.yml logical_axis_rules: `embed` over fsdp, context, expert; `embed_moe` over fsdp,
        // context; shard_optimizer_over_data for ZeRO-1 over data.
        .sharding = ShardingFamily::kWeightsOverShardAxes,
        .keep_gathered = KeepGathered::kWithPipelineOnly,  // pipeline_fsdp_ag_once
        .max_zero_with_pipeline = 3,
        .fsdp_with_pipeline = true,
        // logical rule activation_embed -> tensor: activations between layers are sharded over
        // tensor, so its collectives are Megatron SP's reduce-scatter / all-gather, never an
        // all-reduce.
        .sequence_parallel_on = true,
        .sequence_parallel_off = false,
        .tensor_with_pipeline = true,
        .ring_context = true,  // context_parallel_strategy "ring" or "all_gather"
        .all_gather_context = true,
        .experts_split_over_tensor = true,  // logical rule mlp_moe -> tensor
        .expert_with_context = true,
        .expert_capacity = true,  // capacity_factor (-1: dropless)
        // layers/decoders.py get_remat_policy: always rematerialises under some policy. "full"
        // for full; "minimal" for minimal (shardsim's set is the checkpoint_dots_with_no_batch_dims
        // one MaxText had until 6426085, Aug 2025: the projections saved, the attention core,
        // norms, activations and routed experts rebuilt; since, minimal also saves the routed
        // experts' mlpwi_0 / mlpwo, which shardsim's set does not yet); "minimal_with_context"
        // (everything named saved) for none; save_qkv_proj, save_dot_except_mlp,
        // save_dot_with_context_except_mlp and save_out_proj for the save-* policies.
        .recompute = {true, false, true, false, false, true, true, true, true, true},
        // base.yml dtype bfloat16 / float32; quantization "fp8"; fp16 is not a TPU dtype.
        .bf16 = true, .fp16 = false, .fp8 = true,
        .fp32 = true,
        .unfused_attention = true,  // attention: dot_product
        .repeated_kv = false,       // its attention ops take grouped K/V heads
        .offload = OffloadRule::kEveryLayer,   // configs/types.py: remat_policy minimal_offloaded, qkv_proj_offloaded
        // base.yml: decoder layers = stages x num_layers_per_pipeline_stage x repeats.
        .layout = LayoutRule::kEqual,
        .microbatches_multiple_of_stages = true,  // num_pipeline_microbatches
        // utils/gradient_accumulation.py: a scan of gradient_accumulation_steps, each through
        // the pipeline of num_pipeline_microbatches, each scan step's gradients computed (and
        // reduced to their shards) before they are added up.
        .pipeline_rounds = RoundsRule::kReducedEachRound,
        // XLA's scheduler overlaps the data, fsdp, pipeline and context collectives. Tensor: a
        // switch, XLA's continuation fusion of collectives with compute (benchmarks/
        // xla_flags_library.py CF_FOR_ALL_GATHER, "a form of parallelizing compute work with
        // collectives"), which MaxText's v5p scripts set in LIBTPU_INIT_ARGS and the export
        // writes as a launch comment (configs/tpu/v5p/*.sh). All-to-all
        // overlap has no such flag set: never.
        .overlap = {kOn, kOn, kSw, kOn, kOn, kOff},
        .pipeline_overlap_one_chunk = kOn,
        .pipeline_overlap_interleaved = kOn,
        .context_overlap_ring = kOn,
        .context_overlap_all_gather = kOn,
        .one_switch_data_fsdp = false,
        .reduces_after_pipeline_drains = false,
        .tensor_overlap_needs_sequence_parallel = false,
        // No setting: XLA's partitioner reduces the weight gradients inside the backward, as the
        // dots produce them (dtype "bfloat16" in configs/base.yml; the fp32 weights, weight_dtype,
        // take them after, and grad_dtype only casts them afterwards, trainers/pre_train/train.py).
        // shardsim's reading of the code, not a measurement.
        .grad_reduce = GradReduceRule::kComputeDtype,
        .flop_count = FlopCount::kCausalWindows,
        .flop_count_source = "src/maxtext/utils/maxtext_utils.py calculate_tflops_training_per_device (attention / 2 for the causal mask; "
                             "local layers S W - W^2/2 per sequence, its Gemma 2/3 counts)",
        // The loss is traced into the jitted train step with everything else: XLA fuses it.
        .fused_cross_entropy = true,
        .eager_cross_entropy = false,
        .cross_entropy_default = "fused",
        // XLA fuses the elementwise work into its neighbours.
        .fused_elementwise = true,
        .eager_elementwise = false,
        .elementwise_default = "fused",
        // base.yml quantization "fp8": per-tensor scales (shardsim's reading).
        .fp8_recipes = {true, false, false, false, false},
        .fp8_recipe_default = "tensorwise",
        .fp8_dispatch_recipe = "",
        // flax linen/fp8_ops.py in_qdq: the dot reads quantised-dequantised values in the compute
        // dtype, which autodiff keeps.
        .saved_input_dtype = "bf16",
        .fp8_param_gather = false,  // weights sharded and gathered in their own dtype
        .fp8_tensor_gather = false,  // in_qdq: XLA's collectives move the compute dtype
        .deepep_setting = "",       // XLA's all-to-all (or ragged all-to-all) sends every routed copy
        .round_robin_setting = "",  // its routers follow their scores
        .mamba_layers = false,  // decoder blocks of attention and MLPs
        .moe_latent = false,
        .moe_folding = false,
        .sequence_parallel_inputs = "",  // XLA's rematerialisation decides
        .pipeline_buffers = "",          // XLA's buffer assignment decides
        .tensor_overlap_scope = "",      // XLA's collective matmul decides
        .mtp_setting = "mtp_num_layers",  // configs/base.yml
        .flex_attention_setting = "",  // attention: dot_product, flash (Pallas), cudnn_flash_te
        // configs/base.yml weight_dtype float32 (dtype bfloat16 is the activations'); optax's
        // adam keeps mu and nu in the parameters' dtype.
        .master_weights = "fp32",
        .memory_allocator = "static",  // XLA's buffer assignment: buffers by liveness, fixed at compile time
    },
    {
        .framework = Framework::kDeepSpeed,
        .name = "deepspeed",
        .source = "deepspeedai/DeepSpeed edaa7221",
        // deepspeed/runtime/pipe/topology.py PipeModelDataParallelTopology: pipe, data, model;
        // MiCS shard groups and expert groups of consecutive data ranks (utils/groups.py).
        .mesh_order = {kPipeline, kData, kFsdp, kExpert, kContext, kTensor},
        .mesh_order_text = "DeepSpeed lays out pipe, data, model (tensor fastest)",
        // runtime/zero/config.py: zero_optimization.stage 0-3 over the data-parallel group;
        // mics_shard_size for ZeRO-3 within groups replicated across them (HSDP).
        .sharding = ShardingFamily::kZeroOverAll,
        .keep_gathered = KeepGathered::kNever,  // ZeRO-3 releases parameters after use
        // runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
        .max_zero_with_pipeline = 1,
        .fsdp_with_pipeline = false,
        // runtime/tensor_parallel/config.py tensor_parallel.autotp_size: AutoTP splits linears
        // and all-reduces, with no sequence parallelism; PipelineEngine takes model parallelism
        // only from a Megatron mpu, not from AutoTP.
        .sequence_parallel_on = false,
        .sequence_parallel_off = true,
        .tensor_with_pipeline = false,
        // DeepSpeed's sequence parallelism is Ulysses (all-to-all over heads): neither kind.
        .ring_context = false,
        .all_gather_context = false,
        // module_inject/auto_ep_config.py expert_parallel.autoep_size: experts over data ranks,
        // not tensor-split; engine.py: AutoEP with ZeRO-3 refuses AutoTP.
        .experts_split_over_tensor = false,
        .expert_with_context = true,
        .expert_capacity = false,
        // activation_checkpointing / pipeline.activation_checkpoint_interval: whole layers.
        .recompute = {true, false, true, false, false, false},
        .bf16 = true, .fp16 = true, .fp8 = false,
        .fp32 = true,               // bf16.enabled, fp16.enabled
        .unfused_attention = true,  // the model code's attention
        .repeated_kv = true,        // the model code decides (Hugging Face models have repeated K/V)
        .offload = OffloadRule::kNone,         // activation_checkpointing cpu_checkpointing (partitioned checkpoints to CPU) is not modelled
        // runtime/pipe/module.py partition_method "type:<layer>" balances decoder layers only,
        // the first stages taking the remainder (FrameworkPartLayers).
        .layout = LayoutRule::kFrontLoaded,
        .microbatches_multiple_of_stages = false,
        // runtime/pipe/engine.py train_batch: one TrainSchedule over gradient_accumulation_steps.
        .pipeline_rounds = RoundsRule::kOneSchedule,
        // zero_optimization.overlap_comm (one switch for data and fsdp reductions),
        // tensor_parallel.tp_overlap_comm; PipelineEngine's sends block (runtime/pipe/p2p.py).
        .overlap = {kSw, kSw, kSw, kOff, kOff, kOff},
        .pipeline_overlap_one_chunk = kOff,
        .pipeline_overlap_interleaved = kOff,
        .context_overlap_ring = kOff,
        .context_overlap_all_gather = kOff,
        .one_switch_data_fsdp = true,
        // runtime/pipe/schedule.py TrainSchedule: ReduceGrads after the last micro-batch's step.
        .reduces_after_pipeline_drains = true,
        .tensor_overlap_needs_sequence_parallel = false,
        // runtime/engine.py communication_data_type: the config's, else the fp16 / bf16 in use
        // (constants.py COMMUNICATION_DATA_TYPE_DEFAULT None); config.py reads fp32/bf16/fp16.
        .grad_reduce = GradReduceRule::kAnyByConfig,
        // profiling/flops_profiler/profiler.py counts the torch ops it sees (3 x forward):
        // flash-attn kernels not at all, elementwise ops too. No model-FLOP convention.
        .flop_count = FlopCount::kNone,
        .flop_count_source = "deepspeed/profiling/flops_profiler/profiler.py (counts the ops it sees; no model-FLOP count)",
        // The loss is the model code's (Hugging Face models upcast the logits and call
        // F.cross_entropy): eager.
        .fused_cross_entropy = false,
        .eager_cross_entropy = true,
        .cross_entropy_default = "eager",
        // The user's model as written or compiled (or with kernel injection): its configuration
        // does not say; costed fused unless the plan says eager.
        .fused_elementwise = true,
        .eager_elementwise = true,
        .elementwise_default = "fused",
        .fp8_recipes = {false, false, false, false, false},  // no fp8 training
        .fp8_recipe_default = "",
        .fp8_dispatch_recipe = "",
        .saved_input_dtype = "",
        .fp8_param_gather = false,
        .fp8_tensor_gather = false,  // no fp8 training
        .deepep_setting = "",  // DeepSpeed-MoE's all-to-all sends every routed copy
        .round_robin_setting = "",  // its gates follow their scores
        .mamba_layers = false,
        .moe_latent = false,
        .moe_folding = false,
        .sequence_parallel_inputs = "",  // AutoTP has no sequence parallelism
        // runtime/pipe/engine.py keeps num_pipe_buffers() sets of inputs and outputs, one per
        // micro-batch in flight: neither of shardsim's torch-pipelining values; not profiled.
        .pipeline_buffers = "",
        .tensor_overlap_scope = "",  // not profiled (tensor_parallel.tp_overlap_comm)
        .mtp_setting = "",
        .flex_attention_setting = "",
        // bf16 / fp16 with ZeRO: fp32 partitions of the weights beside the 16-bit model
        // (runtime/zero/stage_1_and_2.py single_partition_of_fp32_groups, stage3.py
        // fp32_partitioned_groups_flat), Adam's state in fp32.
        .master_weights = "fp32-copy",
        .memory_allocator = "caching",  // PyTorch's CUDA caching allocator
        .wgrad_bf16_recipe = "",  // no FP8
    },
}};

// Whether no used axis sits between `data` and `fsdp` (data outer) in the plan's mesh order: then
// ZeRO-3 over data x fsdp shards over the same ranks as fsdp alone of their product.
bool DataNextToFsdp(const PlanSpec& p) {
  bool between = false, seen_data = false;
  for (const std::string& name : p.mesh_order) {
    if (name == "data") {
      seen_data = true;
    } else if (name == "fsdp") {
      return seen_data && !between;
    } else if (seen_data && p.mesh.Size(name) > 1) {
      between = true;
    }
  }
  return false;
}

// Megatron's DDP and distributed optimizer under 16-bit training (not Megatron-FSDP, which
// reduces in the parameters' dtype).
bool MegatronDdp(const PlanSpec& p) {
  const DataParallelSharding s = ShardingOf(p);
  return s.fsdp == 1 && s.zero < 2 && p.dtype != "fp32";
}

}  // namespace

DataParallelSharding ShardingOf(const PlanSpec& p) {
  DataParallelSharding s{p.mesh.data, p.mesh.fsdp, p.zero_stage, false};
  if (s.zero == 3 && s.data > 1 && DataNextToFsdp(p)) s.fsdp *= s.data, s.data = 1;
  s.replicas = s.data > 1 || p.mesh.context > 1 || p.mesh.expert > 1;
  if (!s.replicas) s.zero = 0;
  return s;
}

const FrameworkFacts& FactsOf(Framework framework) {
  return kFrameworks[static_cast<size_t>(framework)];
}

PlanSpec CanonicalSharding(const PlanSpec& plan) {
  PlanSpec p = plan;
  const DataParallelSharding s = ShardingOf(plan);
  p.mesh.data = s.data, p.mesh.fsdp = s.fsdp, p.zero_stage = s.zero;
  return p;
}

std::string GradReduceDefault(const FrameworkFacts& f, const PlanSpec& p) {
  if (f.grad_reduce == GradReduceRule::kFp32) return "fp32";
  // Megatron's DDP reduces in fp32 under bf16 (--grad-reduce-in-bf16 aside), fp16 under fp16.
  if (f.grad_reduce == GradReduceRule::kMegatron && MegatronDdp(p) && p.dtype != "fp16") return "fp32";
  return WeightDtype(p);
}

std::vector<std::string> GradReduceSettable(const FrameworkFacts& f, const PlanSpec& p) {
  switch (f.grad_reduce) {
    case GradReduceRule::kAnyByConfig:
      return GradReduceDtypeNames();
    case GradReduceRule::kMegatron:
      // --grad-reduce-in-bf16 under bf16, --accumulate-allreduce-grads-in-fp32 under fp16.
      if (MegatronDdp(p)) return {GradReduceDefault(f, p), p.dtype == "fp16" ? "fp32" : "bf16"};
      return {GradReduceDefault(f, p)};
    case GradReduceRule::kFp32:
    case GradReduceRule::kComputeDtype:
      return {GradReduceDefault(f, p)};
  }
  return {GradReduceDefault(f, p)};
}

OverlapRule OverlapRuleOf(const FrameworkFacts& f, const PlanSpec& p, MeshAxis axis) {
  if (axis == MeshAxis::kPipeline) {
    return strategies::ScheduleOf(p).Chunks(p.mesh.pipeline, p.virtual_stages) > 1
               ? f.pipeline_overlap_interleaved
               : f.pipeline_overlap_one_chunk;
  }
  if (axis == MeshAxis::kContext)
    return p.context_kv == "ring" ? f.context_overlap_ring : f.context_overlap_all_gather;
  if ((axis == MeshAxis::kData || axis == MeshAxis::kFsdp) && p.mesh.pipeline > 1 && f.reduces_after_pipeline_drains)
    return OverlapRule::kNever;
  return f.overlap[static_cast<size_t>(axis)];
}

bool OverlapMatters(const PlanSpec& p, MeshAxis axis) {
  const DataParallelSharding s = ShardingOf(p);
  switch (axis) {
    case MeshAxis::kData:
      return s.replicas;  // gradient reduction over the replicas
    case MeshAxis::kFsdp:
      return s.fsdp > 1 || (s.zero >= 2 && s.replicas);  // per-layer gathers / reduce-scatters
    default:
      return p.mesh.Size(axis) > 1;
  }
}

std::vector<int64_t> FrameworkPartLayers(const FrameworkFacts& f, const ModelSpec& m, const PlanSpec& p) {
  if (f.layout != LayoutRule::kFrontLoaded || p.mesh.pipeline < 2 || p.mesh.pipeline > m.num_layers ||
      m.num_layers % p.mesh.pipeline == 0 || m.mtp_layers > 0) {
    return {};
  }
  // One chunk per stage only (a schedule of several is another gap's).
  const strategies::Schedule& schedule = strategies::ScheduleOf(p);
  if (schedule.Chunks(p.mesh.pipeline, p.virtual_stages) != 1 || schedule.Directions(p.mesh.pipeline) != 1) return {};
  // DeepSpeed's PipelineModule weighs each layer 1 when its class matches partition_method's
  // "type:" pattern, 0 otherwise (the embedding, the final norm and head), and cuts them with
  // partition_balanced (runtime/utils.py at edaa7221): a dynamic program that minimises the
  // spread between the heaviest and the lightest stage, whose ties go to the later cut. With one
  // layer of spread left over, that puts the remainder on the first stages (shardsim's reading
  // of the code, checked on 126 / 8, 80 / 6, 62 / 4 and 10 / 4 layers / stages).
  std::vector<int64_t> layers(static_cast<size_t>(p.mesh.pipeline), m.num_layers / p.mesh.pipeline);
  for (int64_t s = 0; s < m.num_layers % p.mesh.pipeline; ++s) ++layers[static_cast<size_t>(s)];
  return layers;
}

int64_t EvenChunkLayers(const ModelSpec& m, const PlanSpec& p) {
  if (!p.pipeline_layout.empty()) return 0;
  // The default layout's positions along a micro-batch's path, without building the layout (the
  // search asks this of every candidate).
  const strategies::Schedule& schedule = strategies::ScheduleOf(p);
  const int64_t stages = p.mesh.pipeline;
  const int64_t positions =
      stages * schedule.Chunks(stages, p.virtual_stages) / schedule.Directions(stages);
  return m.num_layers % positions == 0 ? m.num_layers / positions : 0;
}

}  // namespace shardsim::planner
