// A stand-in ringpilot-trainer that NEEDS libnccl.so.99 (the fake one) and has no RPATH, so
// the loader finds NCCL only through LD_LIBRARY_PATH: the doctor's "missing NCCL library
// path" test.
extern "C" int ncclGetVersion(int* version);

int main() {
  int v = 0;
  return ncclGetVersion(&v) == 0 && v > 0 ? 0 : 1;
}
