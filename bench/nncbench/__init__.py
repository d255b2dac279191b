"""nncbench: what the scripts of bench/ share, so that each script holds only its study.

    proc     running programs: exit status and output, their JSON lines, wall time and peak RSS
    nnc      paths, the shared models, `nnc bench --json` and graphs written as text IR
    stats    medians, the order of alternated rounds, ratios with their spread
    ort      the ONNX Runtime peer, in its own process with its default (spinning) pool
    machine  the machine line every result carries: CPU, cores, LLVM's host CPU, nnc's ISA
    report   Markdown tables and the current result file of a study (bench/results/STUDY.md)
    device   a lent machine: nnc run from a bundle, cores pinned, a log that survives a cut

bench/README.md says how the scripts use them and how to read what they write.
"""
