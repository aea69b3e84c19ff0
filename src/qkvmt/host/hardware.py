"""What the machine computes natively, and the training precision that follows from it.

bf16 autocast pays on a CPU only where the CPU multiplies bf16 in hardware (AMX, or
AVX512-BF16). Elsewhere oneDNN emulates it, and training runs many times slower than in
float32 (docs/results.md, "Speed", measures both on an AVX2 CPU). So `trainer.precision=auto` picks:

- a GPU: bf16 mixed where the device supports it, else fp16 mixed;
- a CPU with native bf16: bf16 mixed; any other CPU: float32.

An explicit precision always wins. oneDNN's own ISA cap (ONEDNN_MAX_CPU_ISA, e.g. AVX2) counts
too: under it oneDNN cannot use AMX or AVX512-BF16 even where the CPU has them.
"""

import os
import platform
from dataclasses import asdict, dataclass

import torch

AUTO = "auto"
# oneDNN ISA caps below the first one with bf16 dot products (AVX512_CORE_BF16).
_ISAS_WITHOUT_BF16 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}


@dataclass(frozen=True)
class Hardware:
    device: str  # "cuda", "mps" or "cpu": where Lightning's accelerator=auto would put the model
    name: str  # the GPU's or the CPU's model name
    cpu_capability: str  # the SIMD level torch's CPU kernels run at: AVX2, AVX512, ...
    cpu_native_bf16: bool
    gpu_bf16: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_native_bf16() -> bool:
    """True where oneDNN can multiply bf16 in hardware: AMX or AVX512-BF16 (x86), BF16 (Arm)."""
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").upper()
    if cap in _ISAS_WITHOUT_BF16:
        return False
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
        # Not torch.ops.mkldnn._is_mkldnn_bf16_supported(): it is also true on plain AVX-512,
        # where oneDNN emulates bf16.
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def detect(accelerator: str = AUTO) -> Hardware:
    """The hardware a run with this `trainer.accelerator` (or benchmark `device`) lands on."""
    accelerator = str(accelerator).lower()
    capability = torch.backends.cpu.get_cpu_capability()
    native = cpu_native_bf16()
    if accelerator in (AUTO, "gpu", "cuda") and torch.cuda.is_available():
        gpu_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        return Hardware("cuda", torch.cuda.get_device_name(), capability, native, gpu_bf16)
    if accelerator in (AUTO, "mps") and torch.backends.mps.is_available():
        return Hardware("mps", "Apple MPS", capability, native)
    return Hardware("cpu", cpu_name(), capability, native)


def choose_precision(requested, hw: Hardware, setting: str = "trainer.precision") -> tuple[str, str]:
    """(Lightning precision, why) for `requested` ('auto' or any Lightning precision) on `hw`;
    `setting` names where an explicit choice came from."""
    if str(requested) != AUTO:
        return str(requested), f"set by {setting}"
    if hw.device == "cuda":
        if hw.gpu_bf16:
            return "bf16-mixed", f"{hw.name} computes bf16 natively"
        return "16-mixed", f"{hw.name} has no native bf16, so fp16 mixed precision"
    if hw.device == "mps":
        return "32-true", "Apple MPS: float32"
    if hw.cpu_native_bf16:
        return "bf16-mixed", f"the CPU ({hw.cpu_capability}) has native bf16 (AMX or AVX512-BF16)"
    return "32-true", (
        f"the CPU ({hw.cpu_capability}) has no native bf16 (no AMX or AVX512-BF16): bf16 autocast would be "
        "emulated, many times slower than float32"
    )
