import pytest


def _no_gpu_reason() -> str | None:
    from sgemm.record import NoGpuError, device_info

    try:
        device_info()
    except NoGpuError as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if "gpu" in item.keywords or "no_gpu" in item.keywords]
    if not marked:
        return
    reason = _no_gpu_reason()
    for item in marked:
        if "gpu" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU ({reason})"))
        elif "no_gpu" in item.keywords and not reason:
            item.add_marker(pytest.mark.skip(reason="tests the behaviour without a GPU, and this machine has one"))
