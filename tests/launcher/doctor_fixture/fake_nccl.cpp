// A stand-in NCCL (soname libnccl.so.99, so that no installed NCCL satisfies it) for the doctor's
// trainer_libraries test: only ncclGetVersion, reporting NCCL 2.21.5.
extern "C" int ncclGetVersion(int* version) {
  *version = 22105;
  return 0;
}
