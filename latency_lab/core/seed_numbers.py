"""The seed issue's published numbers, kept in one place as data (ms unless named otherwise).

Each table names the GPU, the method and the software it was measured with, as the seed states.
Keys are this suite's executor names, so reference rows sit beside measured ones.
"""

SEED_TIMEIT_L40S = {
    "gpu": "L40S",
    "method": "%timeit fn(**args); torch.cuda.synchronize()",
    "software": "PyTorch 2.5.1, nvFuser pip nightly",
    "rows": {
        "thunder": {"mean_ms": 2.19, "std_ms": 0.00441},
        "eager": {"mean_ms": 2.05, "std_ms": 0.00311},
        "torch.compile": {"mean_ms": 1.36, "std_ms": 0.00986},
    },
}

SEED_NSIGHT_DGX_H100 = {
    "gpu": "DGX H100",
    "method": "Nsight Systems",
    "columns": ("wall_ms", "cpu_overhead_ms", "kernel_ms", "kernels_per_step", "overhead_per_kernel_us"),
    "rows": {
        "thunder": (1.281, 0.984, 0.297, 32, 30.7),
        "thunder:torch": (1.232, 0.814, 0.413, 77, 10.5),
        "torch.compile": (0.455, 0.163, 0.292, 24, 6.8),
        "eager": (1.014, 0.616, 0.398, 65, 9.4),
    },
}

SEED_CUDA_TIMER_DGX_H100 = {
    "gpu": "DGX H100",
    "method": "CUDA events, 10 warm-up + 40 timed calls",
    "rows": {
        "thunder": 1.082,
        "thunder:torchcompile": None,
        "thunder:torch": 0.965,
        "torch.compile": 0.313,
        "eager": 0.834,
    },
    "notes": {"thunder:torchcompile": "N/A in the seed (could not be measured then)"},
}

SEED_SINGLE_ADD_H100 = {
    "gpu": "DGX H100-80GB",
    "method": "CUDA events, one add in isolation",
    "rows": {
        "thunder": 0.072,
        "thunder:torchcompile": 0.075,
        "thunder:torch": 0.042,
        "torch.compile": 0.026,
        "eager": 0.007,
    },
}

# The seed's Counter over the final trace of thunder.jit(model) (default executors, nvFuser).
SEED_TRACE_COUNTER = {
    "python_del": 18,
    "unpack_trivial": 15,
    "linear": 8,
    "nvFusion0": 1,
    "embedding": 1,
    "triu": 1,
    "matmul": 1,
    "TorchCompile0": 1,
    "clone": 1,
    "nvFusion1": 1,
    "copy_with_setitem_impl": 1,
    "TorchCompile1": 1,
    "nvFusion2": 1,
    "sdpaex_grad_forward_scaled_dot_product_efficient_attention": 1,
    "nvFusion3": 1,
    "nvFusion4": 1,
    "nvFusion5": 1,
    "nvFusion6": 1,
    "python_return": 1,
}
