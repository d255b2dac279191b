"""A lent machine: no Debian packages, a time limit, a share of its cores.

bench/device_bundle.sh carries nnc with its own ld.so and libraries; these helpers run it
there, keep the study on cores the host's interrupts leave alone, and log each line as it
comes, so that a run cut short still says what it finished."""

import os


def make_log(path):
    """A print that also appends each line to `path`."""
    def log(*a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        with open(path, "a") as f:
            f.write(line + "\n")
    return log


def pin_cores(threads):
    """Pins this process (and what it starts) to cores 2.. when there are enough (0 and 1
    take the host's interrupts and daemons); returns them."""
    avail = sorted(os.sched_getaffinity(0))
    cores = avail[2:2 + max(threads)] if len(avail) >= 2 + max(threads) else avail
    os.sched_setaffinity(0, cores)
    return cores


def bundle_nnc(bundle):
    """The command that runs the bundle's nnc through its own ld.so and libraries."""
    return [os.path.join(bundle, "lib/ld-linux-x86-64.so.2"), "--library-path",
            os.path.join(bundle, "lib"), os.path.join(bundle, "nnc")]
