#include "cuda/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>

#include "core/error.h"
#include "cuda/attention.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels.h"
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

// Saved activations of one layer (T) and its norms' rstd (fp32).
template <typename T>
struct LayerActs {
  DeviceBuffer<T> x_in, xn1, q, k, v, o, x_mid, xn2, gate, up, h;
  DeviceBuffer<float> rstd1, rstd2, lse;
};

class GpuModel::Impl {
 public:
  virtual ~Impl() = default;
  virtual double Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                         std::vector<float>* output) = 0;
  virtual void Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink) = 0;
  virtual void LoadStreamedGradients() = 0;
  virtual double GradientSquares(bool replicated) const = 0;
  virtual double Optimize(float lr, double squares) = 0;
  virtual const std::vector<GpuParamTensor>& Tensors() const = 0;
  virtual void LoadParameters(const std::vector<float>& values) = 0;
  virtual std::vector<float> Gradients() const = 0;
  virtual void SetGradients(const std::vector<float>& values) = 0;
  virtual int64_t Parameters() const = 0;
  virtual int64_t DeviceBytes() const = 0;
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
    acts_.resize(static_cast<size_t>(L_));
    const int64_t td = tok_ * D_, thk = tok_ * H_ * K_, tgk = tok_ * G_ * K_, tf = tok_ * F_;
    for (LayerActs<T>& a : acts_) {
      a.x_in = DeviceBuffer<T>(td);
      a.xn1 = DeviceBuffer<T>(td);
      a.q = DeviceBuffer<T>(thk);
      a.k = DeviceBuffer<T>(tgk);
      a.v = DeviceBuffer<T>(tgk);
      a.o = DeviceBuffer<T>(thk);
      a.x_mid = DeviceBuffer<T>(td);
      a.xn2 = DeviceBuffer<T>(td);
      a.gate = DeviceBuffer<T>(tf);
      a.up = DeviceBuffer<T>(tf);
      a.h = DeviceBuffer<T>(tf);
      a.rstd1 = DeviceBuffer<float>(tok_);
      a.rstd2 = DeviceBuffer<float>(tok_);
      a.lse = DeviceBuffer<float>(static_cast<int64_t>(c.micro_batch) * H_ * seq_);
    }
    x_final_ = DeviceBuffer<T>(td);
    xnf_ = DeviceBuffer<T>(td);
    rstdf_ = DeviceBuffer<float>(tok_);
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
      logits_ = DeviceBuffer<float>(tok_ * V_);
      if constexpr (!std::is_same_v<T, float>) dlogits_t_ = DeviceBuffer<T>(tok_ * V_);
    }
    ids_ = DeviceBuffer<int32_t>(tok_);
    targets_ = DeviceBuffer<int32_t>(tok_);
    // Each token's position in its sequence (RoPE's angle): its index, or this context rank's.
    std::vector<int32_t> pos(static_cast<size_t>(tok_));
    for (int64_t i = 0; i < tok_; ++i) {
      pos[static_cast<size_t>(i)] = cs_ > 1 ? c.positions[static_cast<size_t>(i % seq_)] : static_cast<int32_t>(i % seq_);
    }
    positions_ = ToDevice(pos);
    if (cs_ > 1) {
      attention_.SetPositions(c.positions, c.key_positions);
      const int64_t kv = tok_ * cs_ * G_ * K_;
      k_full_ = DeviceBuffer<T>(kv);
      v_full_ = DeviceBuffer<T>(kv);
      dk_full_ = DeviceBuffer<T>(kv);
      dv_full_ = DeviceBuffer<T>(kv);
      kv_f_ = DeviceBuffer<float>(tok_ * G_ * K_);
      kv_full_f_ = DeviceBuffer<float>(kv);
    }
  }

  int64_t Parameters() const override { return n_; }

  int64_t DeviceBytes() const override {
    int64_t bytes = static_cast<int64_t>(params_.bytes() * 4 + weights_.bytes());
    for (const LayerActs<T>& a : acts_) {
      bytes += a.x_in.bytes() * 4 + a.q.bytes() * 2 + a.k.bytes() * 2 + a.gate.bytes() * 3 + a.rstd1.bytes() * 2 + a.lse.bytes();
    }
    bytes += x_final_.bytes() * 3 + dres_.bytes() * 2 + dh_.bytes() * 3 + d_o_.bytes() * 2 + dk_.bytes() * 2 + logits_.bytes() +
             dlogits_t_.bytes() + attention_.WorkspaceBytes();
    return bytes;
  }

  double Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                 std::vector<float>* output) override {
    if (static_cast<int64_t>(ids.size()) != tok_ || static_cast<int64_t>(targets.size()) != tok_) {
      throw CudaError("GpuModel::Forward: expected micro_batch x seq_len ids and targets");
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= m_.vocab_size || targets[i] >= m_.vocab_size) throw CudaError("GpuModel::Forward: token id outside the vocabulary");
    }
    if (c_.embedding != input.empty() || static_cast<int64_t>(input.size()) != (c_.embedding ? 0 : tok_ * D_)) {
      throw CudaError("GpuModel::Forward: the first stage takes no input, the others [tokens, hidden]");
    }
    ids_.Upload(ids);
    targets_.Upload(targets);
    host_targets_ = targets;
    if (!c_.embedding) Stage(acts_[0].x_in.data(), input);
    const double loss = ForwardPass(normaliser);
    if (output != nullptr) output->clear();
    if (!c_.head && output != nullptr) *output = Unstage(x_final_.data());
    return loss;
  }

  void Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink) override {
    if (c_.head != grad_output.empty() || static_cast<int64_t>(grad_output.size()) != (c_.head ? 0 : tok_ * D_)) {
      throw CudaError("GpuModel::Backward: the last stage takes no gradient, the others [tokens, hidden]");
    }
    if (!c_.head) dres_.Upload(grad_output);
    sink_ = sink;
    if (sink_ != nullptr && pinned_.size() != n_) {
      pinned_ = PinnedBuffer<float>(n_);
      if (copy_stream_ == nullptr) Check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    }
    BackwardPass();
    if (sink_ != nullptr) {  // the embedding, final norm and head (the tail of the array), then every copy handed over
      const int64_t layers_end = L_ > 0 ? layers_.back().wd + F_ * D_ : 0;
      StreamGradients(layers_end, n_ - layers_end);
      HandOver(true);
      sink_ = nullptr;
    }
    if (grad_input != nullptr) grad_input->clear();
    if (!c_.embedding && grad_input != nullptr) *grad_input = dres_.Download();
  }

  void LoadStreamedGradients() override {
    if (pinned_.size() != n_) throw CudaError("GpuModel::LoadStreamedGradients: no Backward streamed gradients");
    Check(cudaMemcpy(grads_.data(), pinned_.data(), sizeof(float) * static_cast<size_t>(n_), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }

  ~Model() override {
    for (const Pending& p : pending_) cudaEventDestroy(p.done);
    if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  }

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

  // x [n] summed over the tensor-parallel group, in place, staged through host memory.
  void GroupSum(float* x, int64_t n, const std::string& what) {
    if (t_ == 1) return;
    host_.resize(static_cast<size_t>(n));
    Check(cudaMemcpy(host_.data(), x, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    group_->Sum(host_.data(), n, what);
    Check(cudaMemcpy(x, host_.data(), sizeof(float) * static_cast<size_t>(n), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }

  // Gradients [offset, offset + n), final once the work queued so far has run: copied to pinned
  // memory on the copy stream after it, then handed to the sink (HandOver).
  void StreamGradients(int64_t offset, int64_t n) {
    if (n <= 0) return;
    cudaEvent_t queued = nullptr, copied = nullptr;
    Check(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming), "cudaEventCreate");
    Check(cudaEventRecord(queued, nullptr), "cudaEventRecord");
    Check(cudaStreamWaitEvent(copy_stream_, queued, 0), "cudaStreamWaitEvent");
    Check(cudaEventDestroy(queued), "cudaEventDestroy");
    Check(cudaMemcpyAsync(pinned_.data() + offset, grads_.data() + offset, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToHost,
                          copy_stream_),
          "cudaMemcpyAsync to host");
    Check(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), "cudaEventCreate");
    Check(cudaEventRecord(copied, copy_stream_), "cudaEventRecord");
    pending_.push_back({copied, offset, n});
    HandOver(false);
  }

  // Hands the finished copies to the sink, in order; with `all`, waits for every one, letting the
  // sink's reductions progress meanwhile.
  void HandOver(bool all) {
    while (!pending_.empty()) {
      const cudaError_t state = cudaEventQuery(pending_.front().done);
      if (state == cudaSuccess) {
        const Pending p = pending_.front();
        pending_.pop_front();
        Check(cudaEventDestroy(p.done), "cudaEventDestroy");
        sink_->Ready(pinned_.data() + p.offset, p.offset, p.n);
        continue;
      }
      if (state != cudaErrorNotReady) Check(state, "cudaEventQuery");
      if (!all) return;
      sink_->Progress();
    }
  }

  // full [B, S, G, K] = the context group's local K or V [B, S / c, G, K], each batch row's
  // tokens in group order (key_positions'), staged through host memory in fp32.
  void GatherKv(T* full, const T* local, const std::string& what) {
    const int64_t n = tok_ * G_ * K_, row = seq_ * G_ * K_, rows = c_.micro_batch;
    Convert(kv_f_.data(), local, n);
    const std::vector<float> mine = kv_f_.Download();
    host_.resize(static_cast<size_t>(n * cs_));
    context_->AllGather(host_.data(), mine.data(), n, what);
    std::vector<float> ordered(host_.size());  // [rank][b][row] -> [b][rank][row]
    for (int64_t r = 0; r < cs_; ++r) {
      for (int64_t b = 0; b < rows; ++b) {
        std::copy_n(host_.begin() + (r * rows + b) * row, row, ordered.begin() + (b * cs_ + r) * row);
      }
    }
    kv_full_f_.Upload(ordered);
    Convert(full, kv_full_f_.data(), n * cs_);
  }

  // local [B, S / c, G, K] = this rank's block of the context group's sum of full [B, S, G, K].
  void ScatterKvGrad(T* local, const T* full, const std::string& what) {
    const int64_t n = tok_ * G_ * K_, row = seq_ * G_ * K_, rows = c_.micro_batch;
    Convert(kv_full_f_.data(), full, n * cs_);
    const std::vector<float> all = kv_full_f_.Download();
    host_.resize(static_cast<size_t>(n * cs_));  // [b][rank][row] -> [rank][b][row]
    for (int64_t r = 0; r < cs_; ++r) {
      for (int64_t b = 0; b < rows; ++b) std::copy_n(all.begin() + (b * cs_ + r) * row, row, host_.begin() + (r * rows + b) * row);
    }
    std::vector<float> mine(static_cast<size_t>(n));
    context_->ReduceScatterSum(mine.data(), host_.data(), n, what);
    kv_f_.Upload(mine);
    Convert(local, kv_f_.data(), n);
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
    Convert(tmp_d_.data(), dres_.data(), tok_ * D_);
    AddInPlace(next, tmp_d_.data(), tok_ * D_);
  }

  // This stage's layers on acts_[0].x_in (looked up here on the first stage); returns the loss on
  // the last, else 0 with the output in x_final_.
  double ForwardPass(double normaliser) {
    const int t = static_cast<int>(tok_), d = static_cast<int>(D_);
    const int64_t hk = H_ * K_, gk = G_ * K_;
    if (c_.embedding && t_ == 1) {
      EmbeddingForward(acts_[0].x_in.data(), ids_.data(), P(emb_), t, d, 0, static_cast<int>(V_));
    } else if (c_.embedding) {  // each rank looks up the ids in its rows, zeros elsewhere; the sum is the lookup
      EmbeddingForward(dres_.data(), ids_.data(), P(emb_), t, d, static_cast<int>(vocab0_), static_cast<int>(V_));
      GroupSum(dres_.data(), tok_ * D_, "tensor all-reduce of the embedding lookup");
      Convert(acts_[0].x_in.data(), dres_.data(), tok_ * D_);
    }
    for (int64_t l = 0; l < L_; ++l) {
      LayerActs<T>& a = acts_[static_cast<size_t>(l)];
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
        GatherKv(k_full_.data(), a.k.data(), "context all-gather of " + layer + " K");
        GatherKv(v_full_.data(), a.v.data(), "context all-gather of " + layer + " V");
        attention_.Forward(blas_, a.o.data(), a.lse.data(), a.q.data(), k_full_.data(), v_full_.data());
      }
      RowParallel(a.x_mid.data(), a.x_in.data(), a.o.data(), p.wo, hk, "tensor all-reduce of layer " + std::to_string(c_.first_layer + l) + " attention output");
      RmsNormForward(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), P(p.mlp_norm), t, d, c_.norm_eps);
      Linear(a.gate.data(), a.xn2.data(), p.wg, D_, F_);
      Linear(a.up.data(), a.xn2.data(), p.wu, D_, F_);
      SwigluForward(a.h.data(), a.gate.data(), a.up.data(), tok_ * F_);
      T* next = l + 1 < L_ ? acts_[static_cast<size_t>(l + 1)].x_in.data() : x_final_.data();
      RowParallel(next, a.x_mid.data(), a.h.data(), p.wd, F_, "tensor all-reduce of layer " + std::to_string(c_.first_layer + l) + " MLP output");
    }
    if (!c_.head) return 0.0;
    RmsNormForward(xnf_.data(), rstdf_.data(), x_final_.data(), P(final_norm_), t, d, c_.norm_eps);
    if (head_ >= 0) {
      Linear(logits_.data(), xnf_.data(), head_, D_, V_);
    } else {  // tied: logits = x E^T
      blas_.Gemm({logits_.data(), DType::kF32, V_, 0}, {xnf_.data(), TypeOf<T>(), D_, Op::kNo, 0},
                 {W(emb_), TypeOf<T>(), D_, Op::kYes, 0}, tok_, V_, D_, 1.0f, 0.0f);
    }
    if (t_ > 1) {
      return VocabParallelCrossEntropy(logits_.data(), logits_.data(), targets_.data(), host_targets_, t, static_cast<int>(V_),
                                       static_cast<int>(vocab0_), normaliser, *group_);
    }
    return CrossEntropy(logits_.data(), logits_.data(), targets_.data(), t, static_cast<int>(V_), normaliser);
  }

  // From the loss on the last stage, else from the gradient of the output already in dres_; the
  // gradient of this stage's input is left in dres_.
  void BackwardPass() {
    const int t = static_cast<int>(tok_), d = static_cast<int>(D_);
    const int64_t hk = H_ * K_, gk = G_ * K_;
    if (c_.head) HeadBackward();
    for (int64_t l = L_ - 1; l >= 0; --l) {
      LayerActs<T>& a = acts_[static_cast<size_t>(l)];
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
        GatherKv(k_full_.data(), a.k.data(), "context all-gather of layer " + layer + " K in backward");
        GatherKv(v_full_.data(), a.v.data(), "context all-gather of layer " + layer + " V in backward");
        attention_.Backward(blas_, dq_.data(), dk_full_.data(), dv_full_.data(), a.q.data(), k_full_.data(), v_full_.data(), a.o.data(),
                            d_o_.data(), a.lse.data());
        ScatterKvGrad(dk_.data(), dk_full_.data(), "context reduce-scatter of layer " + layer + " dK");
        ScatterKvGrad(dv_.data(), dv_full_.data(), "context reduce-scatter of layer " + layer + " dV");
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
      if (sink_ != nullptr) StreamGradients(p.attn_norm, p.wd + F_ * D_ - p.attn_norm);  // the layer's tensors lie together
    }
    if (c_.embedding) EmbeddingBackward(Gr(emb_), dres_.data(), ids_.data(), t, d, static_cast<int>(vocab0_), static_cast<int>(V_));
  }

  // The loss's gradient through the head and the final norm into dres_.
  void HeadBackward() {
    const int t = static_cast<int>(tok_), d = static_cast<int>(D_);
    const T* dlog = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      dlog = logits_.data();
    } else {
      Convert(dlogits_t_.data(), logits_.data(), tok_ * V_);
      dlog = dlogits_t_.data();
    }
    if (head_ >= 0) {
      LinearWeightGrad(head_, xnf_.data(), dlog, D_, V_);
      LinearInputGrad(dxn_.data(), dlog, head_, D_, V_);
    } else {
      blas_.Gemm({Gr(emb_), DType::kF32, D_, 0}, {dlog, TypeOf<T>(), V_, Op::kYes, 0}, {xnf_.data(), TypeOf<T>(), D_, Op::kNo, 0},
                 V_, D_, tok_, 1.0f, 1.0f);
      blas_.Gemm({dxn_.data(), DType::kF32, D_, 0}, {dlog, TypeOf<T>(), V_, Op::kNo, 0}, {W(emb_), TypeOf<T>(), D_, Op::kNo, 0},
                 tok_, D_, V_, 1.0f, 0.0f);
    }
    GroupSum(dxn_.data(), tok_ * D_, "tensor all-reduce of the head's input gradient");
    dres_.Zero();
    RmsNormBackward(dres_.data(), Gr(final_norm_), dxn_.data(), x_final_.data(), P(final_norm_), rstdf_.data(), t, d);
  }

  // Global-norm clipping as PyTorch's clip_grad_norm_ (runtime/adamw.h's ClipFactor) to
  // sqrt(squares), the whole model's, then AdamW per tensor (no decay on norms).
  double OptimizeStep(float lr, double squares) {
    const double norm = std::sqrt(squares);
    const float factor = std::min(1.0f, static_cast<float>(c_.clip_norm / (norm + 1e-6)));
    if (factor < 1.0f) Scale(grads_.data(), n_, factor);
    ++step_;
    for (const GpuParamTensor& t : tensors_) {
      AdamW(params_.data() + t.offset, adam_m_.data() + t.offset, adam_v_.data() + t.offset, grads_.data() + t.offset, t.rows * t.cols, lr,
            0.9f, 0.95f, 1e-8f, t.decay ? c_.weight_decay : 0.0f, step_);
    }
    RefreshWeights();
    grads_.Zero();
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
  std::vector<LayerActs<T>> acts_;
  DeviceBuffer<T> x_final_, xnf_, tmp_d_, dh_, dgate_, dup_, d_o_, dq_, dk_, dv_, dlogits_t_;
  DeviceBuffer<float> rstdf_, dres_, dxn_, logits_;
  DeviceBuffer<int32_t> ids_, targets_, positions_;
  DeviceBuffer<T> k_full_, v_full_, dk_full_, dv_full_;  // context parallelism: the group's K, V [B, S, G, K]
  DeviceBuffer<float> kv_f_, kv_full_f_;                 // their fp32 staging, local and whole
  // Streaming gradients to a sink during the backward (Backward with a sink).
  struct Pending {
    cudaEvent_t done;
    int64_t offset, n;
  };
  GradientSink* sink_ = nullptr;
  PinnedBuffer<float> pinned_;
  cudaStream_t copy_stream_ = nullptr;
  std::deque<Pending> pending_;
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
  if (HostGroup* g = config.tensor_group; g != nullptr && g->Size() > 1) {
    const int64_t t = g->Size();
    for (auto [what, n] : {std::pair<const char*, int64_t>{"attention heads", model.num_heads}, {"K/V heads", model.num_kv_heads},
                           {"MLP width", model.ffn_hidden_size}, {"vocabulary", model.vocab_size}}) {
      if (n % t != 0) {
        throw InputError("mesh.tensor", std::to_string(t) + " does not divide the model's " + what + " (" + std::to_string(n) + ")",
                         "a tensor size dividing heads, K/V heads, MLP width and vocabulary", "choose a smaller mesh.tensor");
      }
    }
  } else {
    config_.tensor_group = nullptr;
  }
  if (HostGroup* g = config.context_group; g != nullptr && g->Size() > 1) {
    const size_t cs = static_cast<size_t>(g->Size()), seq = static_cast<size_t>(config.seq_len);
    if (seq % cs != 0 || config.positions.size() * cs != seq || config.key_positions.size() != seq) {
      throw InputError("mesh.context", std::to_string(cs) + " ranks for sequences of " + std::to_string(seq) + " with " +
                                           std::to_string(config.positions.size()) + " positions each",
                       "a context size dividing the sequence, each rank given its positions and all ranks'", "");
    }
  } else {
    config_.context_group = nullptr;
  }
  const int64_t layers = config.layers < 0 ? model.num_layers : config.layers;
  if (config.first_layer < 0 || layers < 1 || config.first_layer + layers > model.num_layers) {
    throw InputError("pipeline stage", "layers [" + std::to_string(config.first_layer) + ", " + std::to_string(config.first_layer + layers) + ")",
                     "at least one of the model's " + std::to_string(model.num_layers) + " layers");
  }
  if (model.tied_embeddings && config.head && !config.embedding) {
    throw InputError("--model", "a tied output head on a pipeline stage without the embedding is not on the GPU path yet (model '" + model.name + "')",
                     "untied embeddings, or pipeline 1", "run it on the CPU runtime (--device cpu)");
  }
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
  stats.loss = ForwardBackward(ids, targets, static_cast<double>(rows * seq));
  stats.grad_norm = Optimize(config_.lr);
  return stats;
}
double GpuModel::ForwardBackward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser) {
  const double loss = impl_->Forward(ids, targets, normaliser, {}, nullptr);
  impl_->Backward({}, nullptr, nullptr);
  return loss;
}
double GpuModel::Forward(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets, double normaliser, const std::vector<float>& input,
                         std::vector<float>* output) {
  return impl_->Forward(ids, targets, normaliser, input, output);
}
void GpuModel::Backward(const std::vector<float>& grad_output, std::vector<float>* grad_input, GradientSink* sink) {
  impl_->Backward(grad_output, grad_input, sink);
}
void GpuModel::LoadStreamedGradients() { impl_->LoadStreamedGradients(); }
double GpuModel::GradientSquares(bool replicated) const { return impl_->GradientSquares(replicated); }
double GpuModel::Optimize(float lr, double squares) { return impl_->Optimize(lr, squares); }
double GpuModel::Optimize(float lr) {
  if (config_.tensor_group != nullptr || !config_.embedding || !config_.head) {
    throw CudaError("GpuModel::Optimize(lr): a sharded model's norm is over its ranks: Optimize(lr, squares summed over them)");
  }
  return impl_->Optimize(lr, impl_->GradientSquares(true));
}
const std::vector<GpuParamTensor>& GpuModel::Tensors() const { return impl_->Tensors(); }
void GpuModel::LoadParameters(const std::vector<float>& values) { impl_->LoadParameters(values); }
std::vector<float> GpuModel::Gradients() const { return impl_->Gradients(); }
void GpuModel::SetGradients(const std::vector<float>& values) { impl_->SetGradients(values); }
int64_t GpuModel::Parameters() const { return impl_->Parameters(); }
int64_t GpuModel::DeviceBytes() const { return impl_->DeviceBytes(); }

}  // namespace shardsim::cuda
