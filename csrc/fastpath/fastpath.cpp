// The replay of a launch plan without Python (ftcompile/ops/fastpath.py): CUDA kernels of the
// inference-only twins ftcompile_infer::linear_global / linear_thread / linear_group / attention.
//
// A call whose signature (the op's own arguments' geometry, the weights' addresses, the site, the
// device and stream) matches a plan, whose weights are still the storage it was made from and
// unchanged in place, allocates its output (and per-call buffers), copies the plan's argument
// block with the call's addresses set, and calls the kernel family's C launcher. Any other call
// runs the op's Python body (the full path, or the Python replay), which offers the plan it made
// or found; the call that ran the body files it under the key computed here. A linear call then
// costs 7.6 us of host time on the H200's host, against ~25 us replayed from Python and 12.9 for
// F.linear (benchmarks/NOTES.md, session 44, run 50f).
#include <torch/extension.h>

#include <pybind11/stl.h>

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

enum Op { kGlobal = 0, kThread = 1, kGroup = 2, kAttention = 3, kOps = 4 };
constexpr size_t kMaxPlans = 4096, kSweepEvery = 256;  // as ops/replay.py

// A weight (or bias) the plan was made from: the same storage, alive, and its registered owner's
// version counter where it was (ops/replay.py's guard; the counter is the owner parameter's,
// since inductor hands the ops tensors rebuilt over a parameter's storage).
struct Guard {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;  // held: no other storage takes its address
  const c10::StorageImpl* id;
  c10::VariableVersion version;
  bool versioned;  // an inference tensor has no counter: taken as unchanged (gemm.owner_version)
  uint32_t at;
  bool fresh(const at::Tensor& t) const {
    return t.storage().unsafeGetStorageImpl() == id && !storage.expired() &&
           (!versioned || version.current_version() == at);
  }
  bool alive() const { return !storage.expired(); }
};

struct Plan {
  std::vector<uint8_t> block;  // the argument block, as the C launcher takes it
  int (*fn)(void*) = nullptr;
  std::vector<at::Tensor> keep;  // what the block points at
  std::vector<Guard> guards;
  // linear: byte offsets of the per-call pointers (-1: none), the thin kernel's x-side buffer,
  // y as x's leading shape and n columns, rows ldy apart
  int64_t off_x = -1, off_y = -1, off_xsum = -1, off_xstat = -1;
  int64_t xs_bytes = 0, xstat_delta = 0, n = 0, ldy = 0;
  // attention: offsets of q, k, v, o, K^c, the key norms, V^c, the mask and its tile map; the
  // checksum buffer (K^c, then the norms kn_at bytes in, V^c vc_at bytes in); o's last dimension
  // and layout; the mask converted to fp32 (not bool) and its tile map's size in int32s
  int64_t off_q = -1, off_k = -1, off_v = -1, off_o = -1, off_kc = -1, off_kn = -1, off_vc = -1;
  int64_t off_mask = -1, off_map = -1;
  int64_t cs_bytes = 0, kn_at = 0, vc_at = 0, dv = 0, map_ints = 0;
  bool heads_last = false, mask_float = false;
};

using Key = std::vector<int64_t>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = k.size();
    for (int64_t v : k) h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};

std::mutex g_lock;
std::unordered_map<Key, std::shared_ptr<const Plan>, KeyHash> g_plans;
size_t g_made = 0;
std::atomic<bool> g_enabled{true};  // off while a fault injection is armed
std::atomic<int64_t> g_epoch{0};    // bumped when a module knob that plans depend on changes
std::atomic<int64_t> g_hits{0};
py::object* g_bodies[kOps] = {};  // the ops' Python bodies (leaked: never destroyed at exit)
thread_local std::shared_ptr<Plan> t_offer;  // the plan the running body offered
thread_local bool t_in_body = false;          // this thread runs an op's body for run(), which files offers

void add_geometry(Key& k, const at::Tensor& t) {
  k.push_back(t.dim());
  for (int64_t s : t.sizes()) k.push_back(s);
  for (int64_t s : t.strides()) k.push_back(s);
  k.push_back(static_cast<int64_t>(t.scalar_type()));
}
// x: read per call, so its alignment (16 bytes) and not its address (replay.layout_key).
void add_input(Key& k, const at::Tensor& x) {
  add_geometry(k, x);
  k.push_back(reinterpret_cast<uintptr_t>(x.data_ptr()) & 15);
}
// Weights and biases: the plan points at them, so their addresses.
void add_param(Key& k, const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) {
    k.push_back(-1);
    return;
  }
  add_geometry(k, *t);
  k.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t->data_ptr())));
}

// flag_a, flag_b: the op's two flags (linear: transposed, pad_rows; attention: heads_last, is_causal).
Key make_key(Op op, const at::Tensor& x, const std::vector<at::Tensor>& ws, const std::vector<at::Tensor>& bs,
             bool has_bias, int64_t site, bool flag_a, bool flag_b) {
  Key k;
  k.reserve(64);
  k.push_back(op);
  k.push_back(g_epoch.load(std::memory_order_relaxed));
  k.push_back(x.device().index());
  k.push_back(reinterpret_cast<int64_t>(c10::cuda::getCurrentCUDAStream(x.device().index()).stream()));
  k.push_back(site);
  k.push_back(flag_a);
  k.push_back(flag_b);
  add_input(k, x);
  k.push_back(static_cast<int64_t>(ws.size()));
  for (const auto& w : ws) add_param(k, w);
  k.push_back(has_bias ? static_cast<int64_t>(bs.size()) : -1);
  for (const auto& b : bs) add_param(k, b);
  return k;
}

// A plan's y: x's leading shape, n columns, rows ldy apart in a storage of its own
// (ops/layout.py's empty_rows where ldy > n).
at::Tensor new_output(const Plan& p, const at::Tensor& x) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = p.n;
  if (p.ldy == p.n) return at::empty(shape, x.options());
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  std::vector<int64_t> strides(shape.size(), 1);
  if (shape.size() > 1) {
    strides[shape.size() - 2] = p.ldy;
    for (int d = static_cast<int>(shape.size()) - 3; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  }
  at::Tensor buf = at::empty({rows * p.ldy}, x.options());
  at::Tensor y = at::empty({0}, x.options());
  y.set_(buf.storage(), 0, shape, strides);
  return y;
}

void put_ptr(std::vector<uint8_t>& blk, int64_t off, const void* ptr) {
  if (off >= 0) std::memcpy(blk.data() + off, &ptr, sizeof(ptr));
}

at::Tensor launch(const Plan& p, const at::Tensor& x) {
  at::Tensor y = new_output(p, x);
  std::vector<uint8_t> blk = p.block;
  put_ptr(blk, p.off_x, x.data_ptr());
  put_ptr(blk, p.off_y, y.data_ptr());
  at::Tensor xs;
  if (p.xs_bytes > 0) {
    xs = at::empty({p.xs_bytes}, x.options().dtype(at::kByte));
    uint8_t* base = static_cast<uint8_t*>(xs.data_ptr());
    put_ptr(blk, p.off_xsum, base);
    put_ptr(blk, p.off_xstat, base + p.xstat_delta);
  }
  const int rc = p.fn(blk.data());
  TORCH_CHECK(rc == 0, "ftcompile gemm kernel failed (code ", rc, ") replaying a launch plan");
  return y;
}

// ops/cuda_attention.py's _as4d: the kernel's [B, H, S, D] view.
at::Tensor as4d(const at::Tensor& t) {
  if (t.dim() == 2) return t.unsqueeze(0).unsqueeze(0);
  if (t.dim() == 3) return t.unsqueeze(0);
  if (t.dim() == 4) return t;
  std::vector<int64_t> shape{-1};
  for (int64_t d = t.dim() - 3; d < t.dim(); ++d) shape.push_back(t.size(d));
  return t.reshape(shape);
}

at::Tensor launch_attention(const Plan& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& mask) {
  std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
  shape.back() = p.dv;
  at::Tensor o;
  if (p.heads_last) {  // [B, H, S, D] laid out as [B, S, H, D] (ops/layout.py)
    const int64_t h = shape[1], sq = shape[2], d = shape[3];
    o = at::empty_strided(shape, {sq * h * d, d, h * d, 1}, q.options());
  } else {
    o = at::empty(shape, q.options());
  }
  std::vector<uint8_t> blk = p.block;
  put_ptr(blk, p.off_q, q.data_ptr());
  put_ptr(blk, p.off_k, k.data_ptr());
  put_ptr(blk, p.off_v, v.data_ptr());
  put_ptr(blk, p.off_o, o.data_ptr());
  at::Tensor cs = at::empty({p.cs_bytes}, q.options().dtype(at::kByte));  // the prepass's output
  uint8_t* base = static_cast<uint8_t*>(cs.data_ptr());
  put_ptr(blk, p.off_kc, base);
  put_ptr(blk, p.off_kn, base + p.kn_at);
  put_ptr(blk, p.off_vc, base + p.vc_at);
  at::Tensor m4, map;
  if (p.off_mask >= 0) {  // _mask4 and _mask_map, as the Python replay makes them per call
    std::vector<int64_t> to(q.sizes().begin(), q.sizes().end());
    to.back() = k.size(-2);
    m4 = as4d((p.mask_float ? mask->to(at::kFloat) : *mask).expand(to));
    map = at::zeros({p.map_ints}, q.options().dtype(at::kInt));
    put_ptr(blk, p.off_mask, m4.data_ptr());
    put_ptr(blk, p.off_map, map.data_ptr());
  }
  const int rc = p.fn(blk.data());
  TORCH_CHECK(rc == 0, "ftcompile attention kernel failed (code ", rc, ") replaying a launch plan");
  return o;
}

// The plan for this key, if its weights are still what it was made from.
std::shared_ptr<const Plan> find(const Key& k, const std::vector<at::Tensor>& ws,
                                 const std::vector<at::Tensor>& bs) {
  std::shared_ptr<const Plan> p;
  {
    std::lock_guard<std::mutex> g(g_lock);
    auto it = g_plans.find(k);
    if (it == g_plans.end()) return nullptr;
    p = it->second;
  }
  size_t i = 0;
  bool ok = p->guards.size() == ws.size() + bs.size();
  for (const auto& w : ws) ok = ok && p->guards[i++].fresh(w);
  for (const auto& b : bs) ok = ok && p->guards[i++].fresh(b);
  if (!ok) {
    std::lock_guard<std::mutex> g(g_lock);
    g_plans.erase(k);
    return nullptr;
  }
  return p;
}

void file(Key k, std::shared_ptr<Plan> p) {
  std::lock_guard<std::mutex> g(g_lock);
  if (++g_made % kSweepEvery == 0) {  // plans of weights that died go (they hold derived tensors)
    for (auto it = g_plans.begin(); it != g_plans.end();) {
      bool dead = false;
      for (const auto& gd : it->second->guards) dead = dead || !gd.alive();
      it = dead ? g_plans.erase(it) : std::next(it);
    }
  }
  if (g_plans.size() >= kMaxPlans) g_plans.clear();
  g_plans[std::move(k)] = std::move(p);
}

bool replayable(const at::Tensor& x) {
  return g_enabled.load(std::memory_order_relaxed) &&
         c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None &&
         x.device().index() == c10::cuda::current_device();
}

// The op's Python body (GIL taken); the plan it offers, if any, filed under the call's key.
template <typename CallBody>
at::Tensor body_then_file(bool fast, Key k, size_t n_guards, CallBody body) {
  py::gil_scoped_acquire gil;
  t_offer.reset();
  t_in_body = fast;  // (an offer is wanted only where it can be filed)
  at::Tensor y;
  try {
    y = body();
  } catch (...) {
    t_in_body = false;
    t_offer.reset();
    throw;
  }
  t_in_body = false;
  std::shared_ptr<Plan> offer = std::move(t_offer);
  t_offer.reset();
  if (fast && offer && offer->guards.size() == n_guards) file(std::move(k), std::move(offer));
  return y;
}

// One call: its plan, or the Python body (which may offer the plan it made or replayed).
template <typename CallBody>
at::Tensor run(Op op, const at::Tensor& x, const std::vector<at::Tensor>& ws, const std::vector<at::Tensor>& bs,
               bool has_bias, int64_t site, bool transposed, bool pad_rows, CallBody body) {
  const bool fast = replayable(x);
  Key k;
  if (fast) {
    k = make_key(op, x, ws, bs, has_bias, site, transposed, pad_rows);
    if (auto p = find(k, ws, bs)) {
      g_hits.fetch_add(1, std::memory_order_relaxed);
      return launch(*p, x);
    }
  }
  return body_then_file(fast, std::move(k), ws.size() + bs.size(), body);
}

at::Tensor linear_impl(Op op, const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                       int64_t site, bool transposed, bool pad_rows) {
  std::vector<at::Tensor> ws{weight}, bs;
  if (bias.has_value() && bias->defined()) bs.push_back(*bias);
  return run(op, x, ws, bs, true, site, transposed, pad_rows, [&] {
    return (*g_bodies[op])(x, weight, bias, site, transposed, pad_rows).cast<at::Tensor>();
  });
}

at::Tensor linear_global(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                         int64_t site, bool transposed, bool pad_rows) {
  return linear_impl(kGlobal, x, weight, bias, site, transposed, pad_rows);
}

at::Tensor linear_thread(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                         int64_t site, bool transposed, bool pad_rows) {
  return linear_impl(kThread, x, weight, bias, site, transposed, pad_rows);
}

at::Tensor linear_group(const at::Tensor& x, at::TensorList weights, at::TensorList biases, int64_t site) {
  std::vector<at::Tensor> ws(weights.begin(), weights.end()), bs(biases.begin(), biases.end());
  return run(kGroup, x, ws, bs, !bs.empty(), site, false, false, [&] {
    return (*g_bodies[kGroup])(x, ws, bs, site).cast<at::Tensor>();
  });
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const c10::optional<at::Tensor>& attn_mask, bool is_causal, c10::optional<double> scale,
                     bool enable_gqa, int64_t site, bool heads_last) {
  const bool fast = replayable(q);
  const bool has_mask = attn_mask.has_value() && attn_mask->defined();
  Key key;
  if (fast) {  // cuda_attention._plan_key's terms (its knobs: the epoch)
    key = make_key(kAttention, q, {}, {}, false, site, heads_last, is_causal);
    add_input(key, k);
    add_input(key, v);
    if (has_mask) add_input(key, *attn_mask);
    else key.push_back(-1);
    const double sc = scale.has_value() ? *scale : 0.0;
    int64_t bits;
    std::memcpy(&bits, &sc, sizeof(bits));
    key.push_back(scale.has_value());
    key.push_back(bits);
    key.push_back(enable_gqa);
    if (auto p = find(key, {}, {})) {
      g_hits.fetch_add(1, std::memory_order_relaxed);
      return launch_attention(*p, q, k, v, attn_mask);
    }
  }
  return body_then_file(fast, std::move(key), 0, [&] {
    return (*g_bodies[kAttention])(q, k, v, attn_mask, is_causal, scale, enable_gqa, site, heads_last)
        .cast<at::Tensor>();
  });
}

// ---------------------------------------------------------------- the Python side's calls
// A plan of the argument block `block` for the C launcher at address `fn`.
std::shared_ptr<Plan> new_plan(const py::bytes& block, int64_t fn) {
  auto p = std::make_shared<Plan>();
  const std::string b = block;
  p->block.assign(b.begin(), b.end());
  p->fn = reinterpret_cast<int (*)(void*)>(fn);
  return p;
}

// Called by the op's Python body (cuda_gemm) where it made or replayed a plan: kept for the
// call running that body. guards: the weights and biases, in the op's order; owners: the tensor
// whose version counter tells each one's change in place (abft.gemm.owner; none for an inference
// tensor, taken as unchanged as gemm.owner_version takes it).
void offer(py::bytes block, int64_t fn, int64_t off_x, int64_t off_y, int64_t off_xsum, int64_t off_xstat,
           int64_t xs_bytes, int64_t xstat_delta, int64_t n, int64_t ldy, std::vector<at::Tensor> keep,
           std::vector<at::Tensor> guards, std::vector<at::Tensor> owners) {
  TORCH_CHECK(guards.size() == owners.size(), "fastpath.offer: one owner per guarded tensor");
  auto p = new_plan(block, fn);
  p->off_x = off_x, p->off_y = off_y, p->off_xsum = off_xsum, p->off_xstat = off_xstat;
  p->xs_bytes = xs_bytes, p->xstat_delta = xstat_delta, p->n = n, p->ldy = ldy;
  p->keep = std::move(keep);
  for (size_t i = 0; i < guards.size(); ++i) {
    const auto& vc = owners[i].unsafeGetTensorImpl()->version_counter();
    auto* impl = guards[i].storage().unsafeGetStorageImpl();
    p->guards.push_back(Guard{guards[i].storage().getWeakStorageImpl(), impl, vc, vc.enabled(),
                              vc.enabled() ? vc.current_version() : 0u});
  }
  t_offer = std::move(p);
}

// The same for a cuda_attention plan (no weights: nothing to guard).
void offer_attention(py::bytes block, int64_t fn, std::vector<int64_t> offsets, int64_t cs_bytes, int64_t kn_at,
                     int64_t vc_at, int64_t dv, bool heads_last, bool mask_float, int64_t map_ints,
                     std::vector<at::Tensor> keep) {
  TORCH_CHECK(offsets.size() == 9, "fastpath.offer_attention: q, k, v, o, kc, kn, vc, mask, mask_map offsets");
  auto p = new_plan(block, fn);
  p->off_q = offsets[0], p->off_k = offsets[1], p->off_v = offsets[2], p->off_o = offsets[3];
  p->off_kc = offsets[4], p->off_kn = offsets[5], p->off_vc = offsets[6];
  p->off_mask = offsets[7], p->off_map = offsets[8];
  p->cs_bytes = cs_bytes, p->kn_at = kn_at, p->vc_at = vc_at, p->dv = dv;
  p->heads_last = heads_last, p->mask_float = mask_float, p->map_ints = map_ints;
  p->keep = std::move(keep);
  t_offer = std::move(p);
}

void set_body(int64_t op, py::object body) {
  TORCH_CHECK(op >= 0 && op < kOps, "fastpath.set_body: unknown op");
  g_bodies[op] = new py::object(std::move(body));
}

void set_enabled(bool on) { g_enabled.store(on); }
bool in_body() { return t_in_body; }

void invalidate() {
  g_epoch.fetch_add(1);
  std::lock_guard<std::mutex> g(g_lock);
  g_plans.clear();
}

int64_t hits() { return g_hits.load(); }
int64_t size() {
  std::lock_guard<std::mutex> g(g_lock);
  return static_cast<int64_t>(g_plans.size());
}

}  // namespace

TORCH_LIBRARY_IMPL(ftcompile_infer, CUDA, m) {
  m.impl("linear_global", &linear_global);
  m.impl("linear_thread", &linear_thread);
  m.impl("linear_group", &linear_group);
  m.impl("attention", &attention);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("offer", &offer);
  m.def("offer_attention", &offer_attention);
  m.def("set_body", &set_body);
  m.def("set_enabled", &set_enabled);
  m.def("in_body", &in_body);
  m.def("invalidate", &invalidate);
  m.def("hits", &hits);
  m.def("size", &size);
}
