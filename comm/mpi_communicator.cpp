#include "comm/mpi_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "comm/status.h"

namespace ringpilot::comm {

namespace {

// MPI has no bfloat16; sum through float32. The layout is the upper half of an IEEE
// float, so widening is a shift and narrowing rounds to nearest even like ATen does.
void Bf16Sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    uint32_t ua = static_cast<uint32_t>(a[i]) << 16, ub = static_cast<uint32_t>(b[i]) << 16;
    float fa, fb;
    std::memcpy(&fa, &ua, 4);
    std::memcpy(&fb, &ub, 4);
    float s = fa + fb;
    uint32_t us;
    std::memcpy(&us, &s, 4);
    if ((us & 0x7fffffffu) > 0x7f800000u) {
      b[i] = 0x7fc0;  // NaN stays NaN
    } else {
      us += 0x7fffu + ((us >> 16) & 1u);
      b[i] = static_cast<uint16_t>(us >> 16);
    }
  }
}

MPI_Op Bf16SumOp() {
  static MPI_Op op = [] {
    MPI_Op created;
    MPI_CHECK(MPI_Op_create(&Bf16Sum, /*commute=*/1, &created));
    return created;
  }();
  return op;
}

MPI_Datatype ToMpiType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return MPI_FLOAT;
    case at::kDouble:
      return MPI_DOUBLE;
    case at::kInt:
      return MPI_INT32_T;
    case at::kLong:
      return MPI_INT64_T;
    case at::kByte:
    case at::kBool:
      return MPI_UINT8_T;
    case at::kChar:
      return MPI_INT8_T;
    case at::kBFloat16:
    case at::kHalf:
      return MPI_UINT16_T;
    default:
      throw CommError(std::string("mpi communicator: unsupported dtype ") + at::toString(t) + " (" +
                      ProcessLocation() + ")");
  }
}

MPI_Op ToMpiOp(ReduceOp op, at::ScalarType t) {
  if (t == at::kBFloat16) {
    if (op != ReduceOp::kSum && op != ReduceOp::kAvg) {
      throw CommError("mpi communicator: bfloat16 supports only sum (" + ProcessLocation() + ")");
    }
    return Bf16SumOp();
  }
  if (t == at::kHalf) {
    throw CommError("mpi communicator: float16 reductions are not supported (" + ProcessLocation() +
                    ")");
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

void CheckCpuContiguous(const at::Tensor& t, const char* what) {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) {
    throw CommError(std::string("mpi communicator: ") + what +
                    " needs a defined, contiguous CPU tensor (" + ProcessLocation() + ")");
  }
}

// Spinning pays when every rank of the node has cores of its own for itself and its
// intra-op threads; see the constructor's contract.
bool ChooseSpinWaits(MPI_Comm comm) {
  const char* env = std::getenv("RINGPILOT_MPI_WAIT");
  const std::string mode = env ? env : "auto";
  if (mode == "spin") return true;
  if (mode == "polite") return false;
  if (mode != "auto") {
    throw CommError("RINGPILOT_MPI_WAIT='" + mode + "': expected spin, polite or auto (" +
                    ProcessLocation() + ")");
  }
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local_ranks = 1;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const long demand = static_cast<long>(local_ranks) * std::max(1, at::get_num_threads());
  return cpus > 0 && demand <= cpus;
}

}  // namespace

class MpiWork : public Work {
  using Clock = MpiCommunicator::Clock;

 public:
  MpiWork(MpiCommunicator* owner, CollectiveOp op, int64_t bytes, at::Tensor keep_alive,
          double scale = 1.0)
      : owner_(owner),
        op_(op),
        bytes_(bytes),
        tensor_(std::move(keep_alive)),
        scale_(scale),
        start_(Clock::now()) {}

  ~MpiWork() override {
    if (!done_) Wait();
  }

  MPI_Request* request() { return &request_; }
  void Register() {
    owner_->inflight_.push_back(this);
    seq_ = owner_->started_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  bool Test() override {
    if (done_) return true;
    int flag = 0;
    MPI_CHECK_FATAL(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
    if (flag) Complete();
    return done_;
  }

  void Wait() override {
    if (done_) return;
    owner_->WaitFor(&request_, op_, seq_, start_);
    Complete();
  }

 private:
  void Complete() {
    done_ = true;
    // kAvg: MPI has no average; scale the sum once it has landed.
    if (scale_ != 1.0) tensor_.mul_(scale_);
    auto& v = owner_->inflight_;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
    owner_->completed_seq_.fetch_add(1, std::memory_order_relaxed);
    if (auto* obs = owner_->observer()) {
      obs->OnCollective(op_, bytes_, std::chrono::duration<double>(Clock::now() - start_).count(),
                        std::nan(""));
    }
  }

  MpiCommunicator* owner_;
  CollectiveOp op_;
  int64_t bytes_;
  at::Tensor tensor_;
  double scale_;
  Clock::time_point start_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  uint64_t seq_ = 0;  // 1-based issue order on this communicator
  bool done_ = false;
};

void MpiCommunicator::WaitFor(MPI_Request* request, CollectiveOp op, uint64_t seq,
                              Clock::time_point start) {
  // Oversubscribed ranks that busy-poll take CPU from the peer they are waiting for, so
  // they sleep between polls after a short spin; with a core each, sleeping only adds
  // wake-up latency to every collective (8-10% of a CPU step, bench/results).
  const auto spin_until = Clock::now() + std::chrono::microseconds(200);
  // MPI waits forever for a peer that stopped: the deadline is ours to keep.
  const bool timed = timeout_s_ > 0;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_s_));
  int flag = 0;
  for (uint64_t polls = 0;; ++polls) {
    MPI_CHECK_FATAL(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
    if (flag) return;
    const bool check_clock = !spin_waits_ || (polls & 1023) == 0;
    if (!check_clock) continue;
    const auto now = Clock::now();
    if (timed && now > deadline) {
      AbortJob(std::string(ToString(op)) + " #" + std::to_string(seq) + " not complete after " +
                   std::to_string(std::chrono::duration<double>(now - start).count()) +
                   " s (comm.timeout_s " + std::to_string(timeout_s_) +
                   "); a peer rank is stopped, hung or dead",
               1);
    }
    if (!spin_waits_ && now > spin_until) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

MpiCommunicator::MpiCommunicator(MPI_Comm parent) {
  spin_waits_ = ChooseSpinWaits(parent);  // first: it may throw, before we own anything
  MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<Work> MpiCommunicator::AllReduce(const at::Tensor& tensor, ReduceOp op) {
  CheckCpuContiguous(tensor, "AllReduce");
  double scale = 1.0;
  if (op == ReduceOp::kAvg) {
    if (!at::isFloatingType(tensor.scalar_type())) {
      throw CommError("mpi communicator: average of an integer tensor (" + ProcessLocation() + ")");
    }
    scale = 1.0 / size_;
  }
  auto work =
      std::make_unique<MpiWork>(this, CollectiveOp::kAllReduce, tensor.nbytes(), tensor, scale);
  MPI_CHECK_FATAL(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()),
                                 ToMpiType(tensor.scalar_type()), ToMpiOp(op, tensor.scalar_type()),
                                 comm_, work->request()));
  work->Register();
  return work;
}

std::unique_ptr<Work> MpiCommunicator::Broadcast(const at::Tensor& tensor, int root) {
  CheckCpuContiguous(tensor, "Broadcast");
  auto work = std::make_unique<MpiWork>(this, CollectiveOp::kBroadcast, tensor.nbytes(), tensor);
  // Bytes, not elements: broadcast is type-agnostic and this covers every dtype.
  MPI_CHECK_FATAL(MPI_Ibcast(tensor.data_ptr(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root,
                             comm_, work->request()));
  work->Register();
  return work;
}

std::unique_ptr<Work> MpiCommunicator::AllGather(const at::Tensor& input,
                                                 const at::Tensor& output) {
  CheckCpuContiguous(input, "AllGather input");
  CheckCpuContiguous(output, "AllGather output");
  if (output.nbytes() != input.nbytes() * static_cast<size_t>(size_)) {
    throw CommError("mpi communicator: AllGather output must be size() x input (" +
                    ProcessLocation() + ")");
  }
  auto work = std::make_unique<MpiWork>(this, CollectiveOp::kAllGather, input.nbytes(), output);
  MPI_CHECK_FATAL(MPI_Iallgather(input.data_ptr(), static_cast<int>(input.nbytes()), MPI_BYTE,
                                 output.data_ptr(), static_cast<int>(input.nbytes()), MPI_BYTE,
                                 comm_, work->request()));
  work->Register();
  return work;
}

void MpiCommunicator::Barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK_FATAL(MPI_Ibarrier(comm_, &request));
  WaitFor(&request, CollectiveOp::kBarrier, started_seq() + 1, Clock::now());
}

void MpiCommunicator::Progress() {
  // OpenMPI has no asynchronous progress thread for these collectives: they only
  // advance inside MPI calls, so backward pokes them between gradient hooks.
  // Testing each request also stamps its completion time close to when it happened.
  // Test() may remove the work from inflight_, so iterate over a copy.
  if (inflight_.empty()) return;
  auto pending = inflight_;
  for (MpiWork* w : pending) w->Test();
}

}  // namespace ringpilot::comm
