/* The network rate `hetla simulate --network` takes, measured between ranks 0 and 1 of an
 * MPI job: half the round-trip time of messages of 8 bytes (the latency) and of BYTES
 * bytes (default 524288, one 256 x 256 tile of f64), best of 200 after 20 warm-ups.
 *
 *   mpicc -O2 -o /tmp/pingpong scripts/mpi-pingpong.c
 *   mpirun -np 2 /tmp/pingpong [BYTES]
 *
 * prints "latency_us bandwidth_GB_per_s", the form --network reads ("0.4,6.1"). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double half_round_trip(char *buf, int bytes, int rank) {
    double best = 1e30;
    for (int i = 0; i < 220; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
        t = (MPI_Wtime() - t) / 2;
        if (i >= 20 && t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int bytes = argc > 1 ? atoi(argv[1]) : 524288;
    if (size < 2 || bytes < 8) {
        if (rank == 0) fprintf(stderr, "needs 2 ranks and at least 8 bytes\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = calloc(bytes, 1);
    double small = half_round_trip(buf, 8, rank);
    double large = half_round_trip(buf, bytes, rank);
    if (rank == 0) {
        double gb_per_s = bytes / (large - small) / 1e9;
        printf("%.3f,%.3f\n", small * 1e6, gb_per_s);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
