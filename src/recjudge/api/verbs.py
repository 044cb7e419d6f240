"""How a verb is made from its settings model: the signature, the docstring and the call.

A verb's work is a function of one validated settings object (``compare_settings(s)``); the verb
users call is built around it by :func:`verb` — main inputs positional, every other setting a
keyword with its model's default, ``protocol=`` to start from a protocol's settings — so the
signature ``help()`` shows is the model's, and a new setting is one field of the model.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError
from ..settings import PYTHON, Settings

__all__ = ["verb"]


def verb(model: type[Settings], positional: Sequence[str] = (), extra: Sequence[inspect.Parameter] = ()):
    """Decorator: the public verb of ``work(settings, **extra)``.

    The verb takes ``positional`` settings by position (or keyword), every other setting by
    keyword, the ``extra`` parameters (e.g. ``progress``) passed to ``work`` as they are, and
    ``protocol``. A ready ``model`` instance may be passed alone instead.
    """
    extra_names = [p.name for p in extra]

    def wrap(work: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(work)
        def call(*args: Any, protocol: Any = None, **options: Any) -> Any:
            passed = {k: options.pop(k) for k in list(options) if k in extra_names}
            if len(args) == 1 and isinstance(args[0], model):
                if options or protocol is not None:
                    raise ConfigError(f"give a {model.__name__} alone, or its settings as parameters, not both")
                return work(args[0], **passed)
            if len(args) > len(positional):
                raise TypeError(f"{work.__name__}() takes {len(positional)} positional argument(s) "
                                f"({', '.join(positional)}), {len(args)} given; give the others by name")
            values = dict(zip(positional, args))
            twice = sorted(set(values) & set(options))
            if twice:
                raise TypeError(f"{work.__name__}() got {', '.join(twice)} both by position and by name")
            values.update(options)
            settings = (model.from_protocol(protocol, spelled=PYTHON, **values) if protocol is not None
                        else model.build(values, spelled=PYTHON))
            return work(settings, **passed)

        # the verb is what users call: tools that unwrap (help(), the API reference) must see its
        # parameters, not the work function's one settings object
        del call.__wrapped__
        call.__signature__ = model.signature(positional, extra)
        call.__doc__ = (inspect.cleandoc(work.__doc__ or "") + "\n\nParameters:\n" + model.parameters_doc()
                        + "".join(f"\n    {p.name}: {p.annotation if isinstance(p.annotation, str) else ''}"
                                  for p in extra))
        call.settings = model
        return call

    return wrap
