// The NCCL profiler plugin ABI, versions 2 to 5, declared from NCCL's own headers
// (NVIDIA/nccl plugins/profiler/example/nccl/profiler_v{2,3,4,5}.h, profiler.h, common.h;
// `ext-profiler/` in releases before 2.27). NCCL looks up `ncclProfiler_v5` first and falls
// back version by version; plugin.cpp exports all four.
//
// Which NCCL asks for which: v2 since 2.23, v3 since 2.25, v4 since 2.26, v5 since 2.28.
// The layouts must match NCCL's byte for byte: the union members are copied in field order,
// including the ones this plugin never reads.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ringpilot::nccl_profiler::abi {

/// ncclResult_t; a profiler returns only kSuccess, except init, whose error disables the
/// plugin (NCCL then carries on without it).
enum Result : int { kSuccess = 0, kInternalError = 3 };

/// ncclDebugLogger_t (its level and subsystem enums are plain ints here).
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

/// Event types: eDescr->type and the bits of eActivationMask.
enum EventType : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,       // v5
  kCollApi = 1u << 9,        // v5
  kP2pApi = 1u << 10,        // v5
  kKernelLaunch = 1u << 11,  // v5
};

/// ncclProfilerEventState_t: the one state this plugin reads.
enum EventState : int { kKernelChStop = 22 };

// ---- v5 (NCCL 2.28) ----
struct EventDescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;  // kernel start, GPU globaltimer (ns)
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

/// ncclProfilerEventStateArgs_v4_t and _v5_t (identical).
union EventStateArgsV4 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // kernel stop, GPU globaltimer (ns)
  } kernelCh;
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, EventStateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

// ---- v4 (NCCL 2.26, 2.27) ----
struct EventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                 int nNodes, int nranks, int rank, DebugLogger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, EventStateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

// ---- v3 (NCCL 2.25) and v2 (NCCL 2.23, 2.24): no rank or size at init; the communicator
// hash rides on every Coll/P2p descriptor. ----
struct EventDescrV3 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

struct EventDescrV2 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
  };
};

/// ncclProfilerEventStateArgs_v2_t and _v3_t (identical); never read here.
union EventStateArgsV2 {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
};

struct ProfilerV3 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV3* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, EventStateArgsV2* eStateArgs);
  Result (*finalize)(void* context);
};

struct ProfilerV2 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV2* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, EventStateArgsV2* eStateArgs);
  Result (*finalize)(void* context);
};

}  // namespace ringpilot::nccl_profiler::abi
