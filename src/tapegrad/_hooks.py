"""``RemovableHandle``: what registering a hook returns, for a module, a tensor or globally
(PyTorch's ``torch.utils.hooks.RemovableHandle``, which programs name in annotations and
``isinstance`` checks).  Below every module that registers hooks, so each can use it."""

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """``remove()`` takes the hook out again, as does leaving a ``with`` block.
    ``hooks_dict`` holds the hooks by id; ``extra_dict`` (a dict or set, or a list of them:
    flags kept beside the hooks, such as which take keyword arguments) loses the id too.
    Ids come from one counter for every handle, as PyTorch's do, so they stay unique across
    modules and tensors."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self._hooks = hooks_dict
        self._extras = () if extra_dict is None else \
            tuple(extra_dict) if isinstance(extra_dict, list) else (extra_dict,)

    def remove(self):
        self._hooks.pop(self.id, None)
        for extra in self._extras:
            if isinstance(extra, set):
                extra.discard(self.id)
            else:
                extra.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class ListedHookHandle(RemovableHandle):
    """The handle of a hook kept in a list (a tensor's gradient hooks, which run in the
    order they were added): ``remove()`` takes that hook out of the list."""

    def __init__(self, hooks, hook):
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self._hooks, self._hook = hooks, hook

    def remove(self):
        try:
            self._hooks.remove(self._hook)
        except ValueError:      # (removed already)
            pass
