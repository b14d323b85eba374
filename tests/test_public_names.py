"""One meaning per public name across the packages (issue 34): a name in the ``__all__`` of any module of
torch_ude, mhe, baselines or microcontroller names one object everywhere it is exported (a re-export is
the same object), so that ``Recording`` or ``simulate`` read in one package cannot mean another
package's different thing. ``main``, a command's entry point in its own module, is the one exception."""
import importlib
import pkgutil

#: The names a module may define for itself: the entry point of its command (``python -m``).
PER_MODULE = {"main"}


def _exports() -> dict[str, list[tuple[str, object]]]:
    """Per public name, the (module, object) pairs of every module that exports it."""
    out: dict[str, list[tuple[str, object]]] = {}
    for package in ("torch_ude", "mhe", "baselines", "microcontroller"):
        root = importlib.import_module(package)
        names = [package, *(m.name for m in pkgutil.walk_packages(root.__path__, f"{package}."))]
        for name in names:
            module = importlib.import_module(name)
            for public in getattr(module, "__all__", ()):
                out.setdefault(public, []).append((name, getattr(module, public)))
    return out


def test_every_public_name_means_one_object_across_the_packages():
    exports = _exports()
    assert len(exports) > 300  # every package was walked
    clashes = {name: sorted(module for module, _ in pairs) for name, pairs in exports.items()
               if name not in PER_MODULE and any(obj is not pairs[0][1] for _, obj in pairs)}
    assert clashes == {}


def test_the_renamed_pairs_stay_apart():
    import mhe
    import torch_ude

    # torch_ude's simulated sensor stream and mhe's input-output recording; its simulator and mhe's closed loop
    assert torch_ude.simulate.__module__ == "torch_ude.systems.simulate"
    assert mhe.simulate_closed_loop.__module__ == "mhe.data.simulate" and not hasattr(mhe, "simulate")
    assert mhe.Recording.__module__ == "mhe.data.recording"
    assert torch_ude.systems.SimulatedStream.__module__ == "torch_ude.systems.simulate"
    assert not hasattr(torch_ude.systems, "Recording")
