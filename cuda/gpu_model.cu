#include "cuda/gpu_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "core/error.h"
#include "cuda/attention.h"
#include "cuda/context_kv.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/gradient_stream.h"
#include "cuda/kernels.h"
#include "cuda/micro_batch_acts.h"
#include "cuda/vocab_parallel_loss.h"

namespace shardsim::cuda {

void CheckGpuTrainable(const ModelSpec& m) {
  std::string why;
  if (m.moe) why = "mixture-of-experts layers";
  else if (m.mla) why = "multi-head latent attention";
  else if (m.mlp != MlpKind::kSwiGlu) why = "an MLP other than SwiGLU";
  else if (m.norm != NormKind::kRmsNorm) why = "a norm other than RMSNorm";
  else if (m.position != PositionKind::kRope) why = "positions other than RoPE";
  else if (m.linear_bias || m.qkv_bias) why = "biases";
  else if (m.num_heads % m.num_kv_heads != 0 || m.head_dim % 2 != 0) why = "heads not a multiple of K/V heads or an odd head dimension";
  if (!why.empty()) {
    throw InputError("--model", "the CUDA path does not train " + why + " (model '" + m.name + "')",
                     "LLaMA-style dense models: SwiGLU, RMSNorm, RoPE, no biases", "run it on the CPU runtime (--device cpu)");
  }
}

// Offsets of one layer's tensors in the flat parameter array.
struct LayerParams {
  int64_t attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd;
};

class GpuModel::Impl {
 public:
  virtual ~Impl() = default;
  virtual double Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                         std::vector<float>* output, int slot) = 0;
  virtual void Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink, int slot) = 0;
  virtual void LoadStreamedGradients() = 0;
  virtual double GradientSquares(bool replicated) const = 0;
  virtual double Optimize(float lr, double squares) = 0;
  virtual const std::vector<GpuParamTensor>& Tensors() const = 0;
  virtual void LoadParameters(const std::vector<float>& values) = 0;
  virtual std::vector<float> Gradients() const = 0;
  virtual void SetGradients(const std::vector<float>& values) = 0;
  virtual int64_t Parameters() const = 0;
  virtual bool FusedAttention() const = 0;
};

namespace {

template <typename T>
constexpr DType TypeOf() {
  return std::is_same_v<T, float> ? DType::kF32 : DType::kBf16;
}

template <typename T>
class Model final : public GpuModel::Impl {
 public:
  Model(const ModelSpec& m, const GpuTrainConfig& c)
      : m_(m), c_(c), group_(c.tensor_group), t_(group_ != nullptr ? group_->Size() : 1), tr_(group_ != nullptr ? group_->Rank() : 0),
        context_(c.context_group), cs_(context_ != nullptr ? context_->Size() : 1), seq_(c.seq_len / cs_),
        tok_(static_cast<int64_t>(c.micro_batch) * seq_), D_(m.hidden_size), H_(m.num_heads / t_), G_(m.num_kv_heads / t_),
        K_(m.head_dim), F_(m.ffn_hidden_size / t_), V_(m.vocab_size / t_), L_(c.layers < 0 ? m.num_layers : c.layers), vocab0_(tr_ * V_),
        attention_({c.micro_batch, static_cast<int>(seq_), static_cast<int>(H_), static_cast<int>(G_), static_cast<int>(K_), c.attention_tile,
                    c.fused_attention && cs_ == 1, cs_ > 1 ? c.seq_len : 0},
                   true, 1.0f / std::sqrt(static_cast<float>(K_))) {
    Layout();
    params_ = DeviceBuffer<float>(n_);
    grads_ = DeviceBuffer<float>(n_);
    adam_m_ = DeviceBuffer<float>(n_);
    adam_v_ = DeviceBuffer<float>(n_);
    if constexpr (!std::is_same_v<T, float>) weights_ = DeviceBuffer<T>(n_);
    Init();
    grads_.Zero();
    adam_m_.Zero();
    adam_v_.Zero();
    const int64_t td = tok_ * D_, thk = tok_ * H_ * K_, tgk = tok_ * G_ * K_, tf = tok_ * F_;
    Slot(0);
    tmp_d_ = DeviceBuffer<T>(td);
    dres_ = DeviceBuffer<float>(td);
    dxn_ = DeviceBuffer<float>(td);
    dh_ = DeviceBuffer<T>(tf);
    dgate_ = DeviceBuffer<T>(tf);
    dup_ = DeviceBuffer<T>(tf);
    d_o_ = DeviceBuffer<T>(thk);
    dq_ = DeviceBuffer<T>(thk);
    dk_ = DeviceBuffer<T>(tgk);
    dv_ = DeviceBuffer<T>(tgk);
    if (c.head) {
      if constexpr (!std::is_same_v<T, float>) dlogits_t_ = DeviceBuffer<T>(tok_ * V_);
    }
    targets_ = DeviceBuffer<int32_t>(tok_);
    // Each token's position in its sequence (RoPE's angle): its index, or this context rank's.
    std::vector<int32_t> pos(static_cast<size_t>(tok_));
    for (int64_t i = 0; i < tok_; ++i) {
      pos[static_cast<size_t>(i)] = cs_ > 1 ? c.positions[static_cast<size_t>(i % seq_)] : static_cast<int32_t>(i % seq_);
    }
    positions_ = ToDevice(pos);
    if (cs_ > 1) {
      attention_.SetPositions(c.positions, c.key_positions);
      context_kv_ = std::make_unique<ContextKv<T>>(*context_, c.micro_batch, seq_, G_ * K_);
    }
  }

  int64_t Parameters() const override { return n_; }
  bool FusedAttention() const override { return attention_.fused(); }

  double Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                 std::vector<float>* output, int slot) override {
    if (static_cast<int64_t>(ids.size()) != tok_ || static_cast<int64_t>(targets.size()) != tok_) {
      throw CudaError("GpuModel::Forward: expected micro_batch x seq_len ids and targets");
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= m_.vocab_size || targets[i] >= m_.vocab_size) throw CudaError("GpuModel::Forward: token id outside the vocabulary");
    }
    if (c_.embedding != input.empty() || static_cast<int64_t>(input.size()) != (c_.embedding ? 0 : tok_ * D_)) {
      throw CudaError("GpuModel::Forward: the first stage takes no input, the others [tokens, hidden]");
    }
    if (forwarded_.count(slot) != 0) throw CudaError("GpuModel::Forward: slot " + std::to_string(slot) + " still holds a forward awaiting its backward");
    Slot(slot);
    forwarded_.insert(slot);
    cur_->ids.Upload(ids);
    targets_.Upload(targets);
    host_targets_ = targets;
    if (!c_.embedding) Stage(cur_->layers[0].x_in.data(), input);
    const double loss = ForwardPass(normaliser);
    if (output != nullptr) output->clear();
    if (!c_.head && output != nullptr) *output = Unstage(cur_->x_final.data());
    return loss;
  }

  void Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink, int slot) override {
    if (c_.head != grad_output.empty() || static_cast<int64_t>(grad_output.size()) != (c_.head ? 0 : tok_ * D_)) {
      throw CudaError("GpuModel::Backward: the last stage takes no gradient, the others [tokens, hidden]");
    }
    if (forwarded_.erase(slot) == 0) throw CudaError("GpuModel::Backward: slot " + std::to_string(slot) + " holds no forward");
    if (!c_.head) dres_.Upload(grad_output);
    Slot(slot);
    if (sink != nullptr) stream_.Begin(sink, n_);
    BackwardPass();
    if (stream_.active()) {  // the embedding, final norm and head (the tail of the array), then every copy handed over
      const int64_t layers_end = L_ > 0 ? layers_.back().wd + F_ * D_ : 0;
      stream_.Send(grads_.data(), layers_end, n_ - layers_end);
      stream_.Finish();
    }
    if (grad_input != nullptr) grad_input->clear();
    if (!c_.embedding && grad_input != nullptr) *grad_input = dres_.Download();
  }

  void LoadStreamedGradients() override { stream_.Load(grads_.data(), n_); }

  double GradientSquares(bool replicated) const override {
    if (t_ == 1) return SquaredSum(grads_.data(), n_);
    double squares = 0;
    for (const GpuParamTensor& t : tensors_) {
      if (!t.replicated || replicated) squares += SquaredSum(grads_.data() + t.offset, t.rows * t.cols);
    }
    return squares;
  }

  double Optimize(float lr, double squares) override {
    const double norm = OptimizeStep(lr, squares);
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return norm;
  }

  const std::vector<GpuParamTensor>& Tensors() const override { return tensors_; }
  std::vector<float> Gradients() const override { return grads_.Download(); }
  void SetGradients(const std::vector<float>& values) override { grads_.Upload(values); }

  void LoadParameters(const std::vector<float>& values) override {
    params_.Upload(values);
    adam_m_.Zero();
    adam_v_.Zero();
    grads_.Zero();
    step_ = 0;
    RefreshWeights();
  }

 private:
  // This rank's block [rows, cols] of the global tensor `name`, from global (row0, col0).
  int64_t Add(const std::string& name, int64_t rows, int64_t cols, int64_t row0, int64_t col0, bool replicated, float init_stddev,
              bool decay) {
    const int64_t at = n_;
    n_ += rows * cols;
    GpuParamTensor t;
    t.name = name, t.rows = rows, t.cols = cols, t.offset = at, t.row0 = row0, t.col0 = col0, t.replicated = replicated;
    t.init_stddev = init_stddev, t.decay = decay;
    tensors_.push_back(t);
    return at;
  }

  void Layout() {
    // The CPU runtime's names, shapes, shards and initial scales (runtime/stage_model.cc): output
    // projections scaled down with depth (GPT-2's 1/sqrt(2L)), norms at one; this tensor rank's
    // heads, MLP columns and vocabulary rows.
    const float in = 0.02f, out = 0.02f / std::sqrt(2.0f * static_cast<float>(m_.num_layers));
    const int64_t q0 = tr_ * H_ * K_, kv0 = tr_ * G_ * K_, f0 = tr_ * F_;
    layers_.resize(static_cast<size_t>(L_));
    for (int64_t l = 0; l < L_; ++l) {
      LayerParams& p = layers_[static_cast<size_t>(l)];
      const std::string n = "layer" + std::to_string(c_.first_layer + l) + ".";
      p.attn_norm = Add(n + "attn_norm", 1, D_, 0, 0, true, 0, false);
      p.wq = Add(n + "wq", D_, H_ * K_, 0, q0, false, in, true);
      p.wk = Add(n + "wk", D_, G_ * K_, 0, kv0, false, in, true);
      p.wv = Add(n + "wv", D_, G_ * K_, 0, kv0, false, in, true);
      p.wo = Add(n + "wo", H_ * K_, D_, q0, 0, false, out, true);
      p.mlp_norm = Add(n + "mlp_norm", 1, D_, 0, 0, true, 0, false);
      p.wg = Add(n + "wgate", D_, F_, 0, f0, false, in, true);
      p.wu = Add(n + "wup", D_, F_, 0, f0, false, in, true);
      p.wd = Add(n + "wdown", F_, D_, f0, 0, false, out, true);
    }
    if (c_.embedding) emb_ = Add("embedding", V_, D_, vocab0_, 0, false, in, true);
    if (c_.head) {
      final_norm_ = Add("final_norm", 1, D_, 0, 0, true, 0, false);
      head_ = m_.tied_embeddings ? -1 : Add("head", D_, V_, 0, vocab0_, false, in, true);
    }
  }

  // Drawn on the device (fast for large models; LoadParameters replaces them with the CPU
  // runtime's values where runs are compared).
  void Init() {
    uint64_t stream = 0;
    for (const GpuParamTensor& t : tensors_) {
      if (t.init_stddev == 0) {
        Fill(params_.data() + t.offset, t.rows * t.cols, 1.0f);
      } else {
        FillNormal(params_.data() + t.offset, t.rows * t.cols, c_.seed, ++stream, t.init_stddev);
      }
    }
    RefreshWeights();
  }

  void RefreshWeights() {
    if constexpr (!std::is_same_v<T, float>) Convert(weights_.data(), params_.data(), n_);
  }

  const T* W(int64_t at) const {
    if constexpr (std::is_same_v<T, float>) {
      return params_.data() + at;
    } else {
      return weights_.data() + at;
    }
  }
  const float* P(int64_t at) const { return params_.data() + at; }
  float* Gr(int64_t at) { return grads_.data() + at; }

  // out [tok, n] = x [tok, k] W [k, n]; beta 1 adds to out.
  template <typename Tout>
  void Linear(Tout* out, const T* x, int64_t w, int64_t k, int64_t n, float beta = 0.0f) {
    blas_.Gemm({out, std::is_same_v<Tout, float> ? DType::kF32 : TypeOf<T>(), n, 0}, {x, TypeOf<T>(), k, Op::kNo, 0},
               {W(w), TypeOf<T>(), n, Op::kNo, 0}, tok_, n, k, 1.0f, beta);
  }
  // grad W [k, n] += x^T dy; dx [tok, k] (fp32 or T) = dy W^T (+ beta dx).
  void LinearWeightGrad(int64_t w, const T* x, const T* dy, int64_t k, int64_t n) {
    blas_.Gemm({Gr(w), DType::kF32, n, 0}, {x, TypeOf<T>(), k, Op::kYes, 0}, {dy, TypeOf<T>(), n, Op::kNo, 0}, k, n, tok_,
               1.0f, 1.0f);
  }
  template <typename Tout>
  void LinearInputGrad(Tout* dx, const T* dy, int64_t w, int64_t k, int64_t n, float beta = 0.0f) {
    blas_.Gemm({dx, std::is_same_v<Tout, float> ? DType::kF32 : TypeOf<T>(), k, 0}, {dy, TypeOf<T>(), n, Op::kNo, 0},
               {W(w), TypeOf<T>(), n, Op::kYes, 0}, tok_, k, n, 1.0f, beta);
  }

  // dst [tok, D] = a host activation [tok, D] (fp32, converted to T); and back.
  void Stage(T* dst, const std::vector<float>& host) {
    dres_.Upload(host);
    Convert(dst, dres_.data(), tok_ * D_);
  }
  std::vector<float> Unstage(const T* src) {
    Convert(dres_.data(), src, tok_ * D_);
    return dres_.Download();
  }

  void CopyT(T* dst, const T* src, int64_t n) {
    Check(cudaMemcpyAsync(dst, src, sizeof(T) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  }

  // The saved activations of micro-batch slot `slot`, allocated at its first use, made current.
  MicroBatchActs<T>& Slot(int slot) {
    if (slot < 0 || slot > 4096) throw CudaError("GpuModel: micro-batch slot " + std::to_string(slot) + " outside [0, 4096]");
    if (static_cast<size_t>(slot) >= slots_.size()) slots_.resize(static_cast<size_t>(slot) + 1);
    std::unique_ptr<MicroBatchActs<T>>& held = slots_[static_cast<size_t>(slot)];
    if (held == nullptr) {
      try {
        held = MicroBatchActs<T>::Allocate({tok_, D_, H_ * K_, G_ * K_, F_, V_, static_cast<int64_t>(c_.micro_batch) * H_ * seq_, L_, c_.head});
      } catch (const CudaError& error) {
        throw CudaError("the activations of micro-batch slot " + std::to_string(slot) + " (" + std::to_string(slot + 1) +
                        " micro-batches in flight on this stage) do not fit on the GPU (" + error.what() +
                        "); hint: pipeline_schedule 1f1b holds fewer micro-batches than gpipe, or a smaller micro_batch_size");
      }
    }
    cur_ = held.get();
    return *held;
  }

  // x [n] summed over the tensor-parallel group, in place, staged through host memory.
  void GroupSum(float* x, int64_t n, const std::string& what) {
    if (t_ == 1) return;
    host_.resize(static_cast<size_t>(n));
    Check(cudaMemcpy(host_.data(), x, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    group_->Sum(host_.data(), n, what);
    Check(cudaMemcpy(x, host_.data(), sizeof(float) * static_cast<size_t>(n), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }

  // next [tok, D] = residual + x W for a row-parallel W [k, D] (this rank's rows: its partial
  // product summed over the group first, in fp32).
  void RowParallel(T* next, const T* residual, const T* x, int64_t w, int64_t k, const std::string& what) {
    CopyT(next, residual, tok_ * D_);
    if (t_ == 1) {
      Linear(next, x, w, k, D_, 1.0f);
      return;
    }
    Linear(dres_.data(), x, w, k, D_);
    GroupSum(dres_.data(), tok_ * D_, what);
    AddInPlace(next, dres_.data(), tok_ * D_);
  }

  // This stage's layers on the current slot's first input (looked up here on the first stage);
  // returns the loss on the last, else 0 with the output in the slot's x_final.
  double ForwardPass(double normaliser) {
    const int t = static_cast<int>(tok_), d = static_cast<int>(D_);
    const int64_t hk = H_ * K_, gk = G_ * K_;
    if (c_.embedding && t_ == 1) {
      EmbeddingForward(cur_->layers[0].x_in.data(), cur_->ids.data(), P(emb_), t, d, 0, static_cast<int>(V_));
    } else if (c_.embedding) {  // each rank looks up the ids in its rows, zeros elsewhere; the sum is the lookup
      EmbeddingForward(dres_.data(), cur_->ids.data(), P(emb_), t, d, static_cast<int>(vocab0_), static_cast<int>(V_));
      GroupSum(dres_.data(), tok_ * D_, "tensor all-reduce of the embedding lookup");
      Convert(cur_->layers[0].x_in.data(), dres_.data(), tok_ * D_);
    }
    for (int64_t l = 0; l < L_; ++l) {
      LayerActs<T>& a = cur_->layers[static_cast<size_t>(l)];
      const LayerParams& p = layers_[static_cast<size_t>(l)];
      RmsNormForward(a.xn1.data(), a.rstd1.data(), a.x_in.data(), P(p.attn_norm), t, d, c_.norm_eps);
      Linear(a.q.data(), a.xn1.data(), p.wq, D_, hk);
      Linear(a.k.data(), a.xn1.data(), p.wk, D_, gk);
      Linear(a.v.data(), a.xn1.data(), p.wv, D_, gk);
      RopeForward(a.q.data(), positions_.data(), t, static_cast<int>(H_), static_cast<int>(K_), c_.rope_theta);
      RopeForward(a.k.data(), positions_.data(), t, static_cast<int>(G_), static_cast<int>(K_), c_.rope_theta);
      if (cs_ == 1) {
        attention_.Forward(blas_, a.o.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data());
      } else {
        const std::string layer = "layer " + std::to_string(c_.first_layer + l);
        ContextKv<T>& kv = *context_kv_;
        kv.Gather(kv.k(), a.k.data(), "context all-gather of " + layer + " K");
        kv.Gather(kv.v(), a.v.data(), "context all-gather of " + layer + " V");
        attention_.Forward(blas_, a.o.data(), a.lse.data(), a.q.data(), kv.k(), kv.v());
      }
      RowParallel(a.x_mid.data(), a.x_in.data(), a.o.data(), p.wo, hk, "tensor all-reduce of layer " + std::to_string(c_.first_layer + l) + " attention output");
      RmsNormForward(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), P(p.mlp_norm), t, d, c_.norm_eps);
      Linear(a.gate.data(), a.xn2.data(), p.wg, D_, F_);
      Linear(a.up.data(), a.xn2.data(), p.wu, D_, F_);
      SwigluForward(a.h.data(), a.gate.data(), a.up.data(), tok_ * F_);
      T* next = l + 1 < L_ ? cur_->layers[static_cast<size_t>(l + 1)].x_in.data() : cur_->x_final.data();
      RowParallel(next, a.x_mid.data(), a.h.data(), p.wd, F_, "tensor all-reduce of layer " + std::to_string(c_.first_layer + l) + " MLP output");
    }
    if (!c_.head) return 0.0;
    RmsNormForward(cur_->xnf.data(), cur_->rstdf.data(), cur_->x_final.data(), P(final_norm_), t, d, c_.norm_eps);
    if (head_ >= 0) {
      Linear(cur_->logits.data(), cur_->xnf.data(), head_, D_, V_);
    } else {  // tied: logits = x E^T
      blas_.Gemm({cur_->logits.data(), DType::kF32, V_, 0}, {cur_->xnf.data(), TypeOf<T>(), D_, Op::kNo, 0},
                 {W(emb_), TypeOf<T>(), D_, Op::kYes, 0}, tok_, V_, D_, 1.0f, 0.0f);
    }
    if (t_ > 1) {
      return VocabParallelCrossEntropy(cur_->logits.data(), cur_->logits.data(), targets_.data(), host_targets_, t, static_cast<int>(V_),
                                       static_cast<int>(vocab0_), normaliser, *group_);
    }
    return CrossEntropy(cur_->logits.data(), cur_->logits.data(), targets_.data(), t, static_cast<int>(V_), normaliser);
  }

  // From the loss on the last stage, else from the gradient of the output already in dres_; the
  // gradient of this stage's input is left in dres_.
  void BackwardPass() {
    const int t = static_cast<int>(tok_), d = static_cast<int>(D_);
    const int64_t hk = H_ * K_, gk = G_ * K_;
    if (c_.head) HeadBackward();
    for (int64_t l = L_ - 1; l >= 0; --l) {
      LayerActs<T>& a = cur_->layers[static_cast<size_t>(l)];
      const LayerParams& p = layers_[static_cast<size_t>(l)];
      const std::string layer = std::to_string(c_.first_layer + l);
      // MLP
      Convert(tmp_d_.data(), dres_.data(), tok_ * D_);
      LinearWeightGrad(p.wd, a.h.data(), tmp_d_.data(), F_, D_);
      LinearInputGrad(dh_.data(), tmp_d_.data(), p.wd, F_, D_);
      SwigluBackward(dgate_.data(), dup_.data(), dh_.data(), a.gate.data(), a.up.data(), tok_ * F_);
      LinearWeightGrad(p.wg, a.xn2.data(), dgate_.data(), D_, F_);
      LinearWeightGrad(p.wu, a.xn2.data(), dup_.data(), D_, F_);
      LinearInputGrad(dxn_.data(), dgate_.data(), p.wg, D_, F_);
      LinearInputGrad(dxn_.data(), dup_.data(), p.wu, D_, F_, 1.0f);
      GroupSum(dxn_.data(), tok_ * D_, "tensor all-reduce of layer " + layer + " MLP input gradient");
      RmsNormBackward(dres_.data(), Gr(p.mlp_norm), dxn_.data(), a.x_mid.data(), P(p.mlp_norm), a.rstd2.data(), t, d);
      // attention
      Convert(tmp_d_.data(), dres_.data(), tok_ * D_);
      LinearWeightGrad(p.wo, a.o.data(), tmp_d_.data(), hk, D_);
      LinearInputGrad(d_o_.data(), tmp_d_.data(), p.wo, hk, D_);
      if (cs_ == 1) {
        attention_.Backward(blas_, dq_.data(), dk_.data(), dv_.data(), a.q.data(), a.k.data(), a.v.data(), a.o.data(), d_o_.data(),
                            a.lse.data());
      } else {  // K and V gathered again (as ring attention passes them round again), dK and dV sent home
        ContextKv<T>& kv = *context_kv_;
        kv.Gather(kv.k(), a.k.data(), "context all-gather of layer " + layer + " K in backward");
        kv.Gather(kv.v(), a.v.data(), "context all-gather of layer " + layer + " V in backward");
        attention_.Backward(blas_, dq_.data(), kv.dk(), kv.dv(), a.q.data(), kv.k(), kv.v(), a.o.data(), d_o_.data(), a.lse.data());
        kv.ScatterSum(dk_.data(), kv.dk(), "context reduce-scatter of layer " + layer + " dK");
        kv.ScatterSum(dv_.data(), kv.dv(), "context reduce-scatter of layer " + layer + " dV");
      }
      RopeBackward(dq_.data(), positions_.data(), t, static_cast<int>(H_), static_cast<int>(K_), c_.rope_theta);
      RopeBackward(dk_.data(), positions_.data(), t, static_cast<int>(G_), static_cast<int>(K_), c_.rope_theta);
      LinearWeightGrad(p.wq, a.xn1.data(), dq_.data(), D_, hk);
      LinearWeightGrad(p.wk, a.xn1.data(), dk_.data(), D_, gk);
      LinearWeightGrad(p.wv, a.xn1.data(), dv_.data(), D_, gk);
      LinearInputGrad(dxn_.data(), dq_.data(), p.wq, D_, hk);
      LinearInputGrad(dxn_.data(), dk_.data(), p.wk, D_, gk, 1.0f);
      LinearInputGrad(dxn_.data(), dv_.data(), p.wv, D_, gk, 1.0f);
      GroupSum(dxn_.data(), tok_ * D_, "tensor all-reduce of layer " + layer + " attention input gradient");
      RmsNormBackward(dres_.data(), Gr(p.attn_norm), dxn_.data(), a.x_in.data(), P(p.attn_norm), a.rstd1.data(), t, d);
      if (stream_.active()) stream_.Send(grads_.data(), p.attn_norm, p.wd + F_ * D_ - p.attn_norm);  // the layer's tensors lie together
    }
    if (c_.embedding) EmbeddingBackward(Gr(emb_), dres_.data(), cur_->ids.data(), t, d, static_cast<int>(vocab0_), static_cast<int>(V_));
  }

  // The loss's gradient through the head and the final norm into dres_.
  void HeadBackward() {
    const int t = static_cast<int>(tok_), d = static_cast<int>(D_);
    const T* dlog = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      dlog = cur_->logits.data();
    } else {
      Convert(dlogits_t_.data(), cur_->logits.data(), tok_ * V_);
      dlog = dlogits_t_.data();
    }
    if (head_ >= 0) {
      LinearWeightGrad(head_, cur_->xnf.data(), dlog, D_, V_);
      LinearInputGrad(dxn_.data(), dlog, head_, D_, V_);
    } else {
      blas_.Gemm({Gr(emb_), DType::kF32, D_, 0}, {dlog, TypeOf<T>(), V_, Op::kYes, 0}, {cur_->xnf.data(), TypeOf<T>(), D_, Op::kNo, 0},
                 V_, D_, tok_, 1.0f, 1.0f);
      blas_.Gemm({dxn_.data(), DType::kF32, D_, 0}, {dlog, TypeOf<T>(), V_, Op::kNo, 0}, {W(emb_), TypeOf<T>(), D_, Op::kNo, 0},
                 tok_, D_, V_, 1.0f, 0.0f);
    }
    GroupSum(dxn_.data(), tok_ * D_, "tensor all-reduce of the head's input gradient");
    dres_.Zero();
    RmsNormBackward(dres_.data(), Gr(final_norm_), dxn_.data(), cur_->x_final.data(), P(final_norm_), cur_->rstdf.data(), t, d);
  }

  // Global-norm clipping as PyTorch's clip_grad_norm_ (runtime/adamw.h's ClipFactor) to
  // sqrt(squares), the whole model's, then AdamW per tensor (no decay on norms).
  double OptimizeStep(float lr, double squares) {
    const double norm = std::sqrt(squares);
    const float factor = std::min(1.0f, static_cast<float>(c_.clip_norm / (norm + 1e-6)));
    ++step_;
    // One pass per tensor: clipping, AdamW, the bf16 weights, the gradients zeroed (the tensors
    // tile the whole array).
    for (const GpuParamTensor& t : tensors_) {
      bf16* weights = nullptr;
      if constexpr (!std::is_same_v<T, float>) weights = weights_.data() + t.offset;
      AdamW(params_.data() + t.offset, adam_m_.data() + t.offset, adam_v_.data() + t.offset, grads_.data() + t.offset, t.rows * t.cols, lr,
            0.9f, 0.95f, 1e-8f, t.decay ? c_.weight_decay : 0.0f, step_, factor, weights);
    }
    return norm;
  }

  ModelSpec m_;
  GpuTrainConfig c_;
  HostGroup* group_;
  int64_t t_, tr_;  // tensor-parallel size and this rank's place
  HostGroup* context_;
  int64_t cs_, seq_;  // context-parallel size; tokens of a sequence this rank holds
  // Tokens per micro-batch, hidden size, this rank's heads, K/V heads, head dimension, MLP width,
  // vocabulary rows (from vocab0_), layers.
  int64_t tok_, D_, H_, G_, K_, F_, V_, L_, vocab0_;
  Blas blas_;
  GpuAttention<T> attention_;
  int64_t n_ = 0, emb_ = 0, final_norm_ = 0, head_ = -1, step_ = 0;
  std::vector<LayerParams> layers_;
  std::vector<GpuParamTensor> tensors_;
  DeviceBuffer<float> params_, grads_, adam_m_, adam_v_;
  DeviceBuffer<T> weights_;
  std::vector<std::unique_ptr<MicroBatchActs<T>>> slots_;  // one per micro-batch in flight
  MicroBatchActs<T>* cur_ = nullptr;                          // the slot of the pass under way
  std::set<int> forwarded_;                                   // slots whose backward is still to come
  DeviceBuffer<T> tmp_d_, dh_, dgate_, dup_, d_o_, dq_, dk_, dv_, dlogits_t_;
  DeviceBuffer<float> dres_, dxn_;
  DeviceBuffer<int32_t> targets_, positions_;
  std::unique_ptr<ContextKv<T>> context_kv_;  // context parallelism's K/V exchange
  GradientStream stream_;                     // gradients to a sink during the backward
  std::vector<int32_t> host_targets_;
  std::vector<float> host_;  // staging for the group's reductions
};

}  // namespace

GpuModel::GpuModel(const ModelSpec& model, const GpuTrainConfig& config) : config_(config) {
  CheckGpuTrainable(model);
  // Kernels index tokens and rows with int: a step's tokens stay well inside it.
  if (static_cast<int64_t>(config.micro_batch) * config.seq_len > (int64_t{1} << 30) || config.micro_batch < 1 || config.seq_len < 1) {
    throw InputError("--micro-batch", std::to_string(static_cast<int64_t>(config.micro_batch) * config.seq_len) + " tokens per micro-batch",
                     "1 to 2^30 (micro-batch x sequence length)");
  }
  // The runtime has refused what users can get wrong (train_gpu.cc); this is the caller's contract.
  const int64_t t = config.tensor_group != nullptr ? config.tensor_group->Size() : 1;
  const int64_t c = config.context_group != nullptr ? config.context_group->Size() : 1;
  const int64_t layers = config.layers < 0 ? model.num_layers : config.layers;
  const size_t seq = static_cast<size_t>(config.seq_len);
  const bool shards = model.num_heads % t == 0 && model.num_kv_heads % t == 0 && model.ffn_hidden_size % t == 0 && model.vocab_size % t == 0;
  const bool positions = c == 1 || (config.positions.size() * static_cast<size_t>(c) == seq && config.key_positions.size() == seq);
  const bool stage = config.first_layer >= 0 && layers >= 1 && config.first_layer + layers <= model.num_layers &&
                     !(model.tied_embeddings && config.head && !config.embedding);
  if (!shards || !positions || !stage) {
    throw CudaError("GpuModel: a split the model cannot take (tensor dividing heads, K/V heads, MLP width and vocabulary; each context "
                    "rank given its positions and all ranks'; a stage of at least one layer; a tied head with its embedding)");
  }
  if (t == 1) config_.tensor_group = nullptr;
  if (c == 1) config_.context_group = nullptr;
  if (config.dtype == DType::kF32) {
    impl_ = std::make_unique<Model<float>>(model, config_);
  } else {
    impl_ = std::make_unique<Model<bf16>>(model, config_);
  }
}

GpuModel::~GpuModel() = default;
GpuStepStats GpuModel::Step(const std::vector<int32_t>& tokens) {
  const int64_t rows = config_.micro_batch, seq = config_.seq_len;
  if (static_cast<int64_t>(tokens.size()) != rows * (seq + 1)) throw CudaError("GpuModel::Step: expected micro_batch x (seq_len + 1) tokens");
  std::vector<int32_t> ids(static_cast<size_t>(rows * seq)), targets(ids.size());
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      ids[static_cast<size_t>(b * seq + s)] = tokens[static_cast<size_t>(b * (seq + 1) + s)];
      targets[static_cast<size_t>(b * seq + s)] = tokens[static_cast<size_t>(b * (seq + 1) + s + 1)];
    }
  }
  GpuStepStats stats;
  const auto t0 = std::chrono::steady_clock::now();
  stats.loss = ForwardBackward(ids, targets, static_cast<double>(rows * seq));
  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const auto t1 = std::chrono::steady_clock::now();
  stats.grad_norm = Optimize(config_.lr);
  stats.forward_backward_s = std::chrono::duration<double>(t1 - t0).count();
  stats.optimizer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return stats;
}
double GpuModel::ForwardBackward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser) {
  const double loss = impl_->Forward(ids, targets, normaliser, {}, nullptr, 0);
  impl_->Backward({}, nullptr, nullptr, 0);
  return loss;
}
double GpuModel::Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                         std::vector<float>* output, int slot) {
  return impl_->Forward(ids, targets, normaliser, input, output, slot);
}
void GpuModel::Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink, int slot) {
  impl_->Backward(grad_output, grad_input, sink, slot);
}
void GpuModel::LoadStreamedGradients() { impl_->LoadStreamedGradients(); }
double GpuModel::GradientSquares(bool replicated) const { return impl_->GradientSquares(replicated); }
double GpuModel::Optimize(float lr, double squares) { return impl_->Optimize(lr, squares); }
double GpuModel::Optimize(float lr) {
  if (config_.tensor_group != nullptr || config_.context_group != nullptr || !config_.embedding || !config_.head) {
    throw CudaError("GpuModel::Optimize(lr): a sharded model's norm is over its ranks: Optimize(lr, squares summed over them)");
  }
  return impl_->Optimize(lr, impl_->GradientSquares(true));
}
const std::vector<GpuParamTensor>& GpuModel::Tensors() const { return impl_->Tensors(); }
void GpuModel::LoadParameters(const std::vector<float>& values) { impl_->LoadParameters(values); }
std::vector<float> GpuModel::Gradients() const { return impl_->Gradients(); }
void GpuModel::SetGradients(const std::vector<float>& values) { impl_->SetGradients(values); }
int64_t GpuModel::Parameters() const { return impl_->Parameters(); }
bool GpuModel::FusedAttention() const { return impl_->FusedAttention(); }

}  // namespace shardsim::cuda
