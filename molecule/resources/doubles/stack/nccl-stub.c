/* Stand-in libnccl (test bed only): just enough ABI for nccl-tests' link probe. */
typedef enum { ncclSuccess = 0 } ncclResult_t;

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_STUB_CODE;
  return ncclSuccess;
}
