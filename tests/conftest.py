import pytest


def _no_gpu_reason() -> str | None:
    from sgemm.record import NoGpuError, device_info

    try:
        device_info()
    except NoGpuError as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and (reason := _no_gpu_reason()):
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU ({reason})")
        for item in gpu_items:
            item.add_marker(skip)
