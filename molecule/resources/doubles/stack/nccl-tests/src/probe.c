/* nccl-tests stand-in: link-time probe of the NCCL (and MPI) the build found. */
#include <stdio.h>
#include <nccl.h>
#ifdef MPI_SUPPORT
#include <mpi.h>
#endif

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) {
    fprintf(stderr, "ncclGetVersion failed\n");
    return 1;
  }
  printf("nccl.h %d.%d.%d (code %d), libnccl reports %d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         NCCL_VERSION_CODE, version);
#ifdef MPI_SUPPORT
  int initialized = 0;
  MPI_Initialized(&initialized); /* callable before MPI_Init: proves libmpi is linked */
  printf("MPI %d.%d headers, libmpi linked (initialized=%d)\n", MPI_VERSION, MPI_SUBVERSION, initialized);
#endif
  return version == NCCL_VERSION_CODE ? 0 : 2;
}
