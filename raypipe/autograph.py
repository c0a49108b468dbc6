"""The source rewrite behind ``@pipeline_def(enable_conditionals=True)``, as DALI's autograph does.

:func:`convert` parses a function's source and rewrites it so that Python's control flow reaches
:mod:`raypipe.conditionals`, which runs it on pipeline data:

* ``if test: ... else: ...`` becomes the two branches as nested functions (assigning the variables
  the ``if`` assigns through ``nonlocal``) and a call of ``if_stmt``; an ``if`` whose branches
  ``return`` is rewritten first so that its returns end its branches (the statements after it move
  into the branch that does not return) and then return one value;
* ``a and b``, ``a or b`` and ``not a`` become calls evaluating ``b`` lazily;
* every call ``f(...)`` goes through :meth:`Converter.call`, which rewrites the user's own functions
  (not those of the standard library, installed packages or raypipe) the first time they are called,
  so that helper functions may branch on pipeline data too.

What is left as Python wrote it, and so raises on pipeline data (``DataNode.__bool__``): ``while``
loops, conditional expressions (``x if c else y``), an ``if`` that ``break``s or ``continue``s a loop
around it, declares ``global`` or ``nonlocal``, or ``yield``s, and a function that returns from
inside a loop, ``with`` or ``try`` block. A function whose source cannot be read is called as it is.

The rewritten code keeps the original's file name and line numbers (tracebacks point at the user's
lines), globals, closure, defaults and attributes, and holds the :class:`Converter` in its closure: a
pipeline's function shipped to another process (a CPU helper, a service actor) takes the rewritten
helper functions with it, so the source is read only where the pipeline was defined.
"""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import sys
import textwrap
import types
import warnings
from collections.abc import Callable
from typing import Any

from . import conditionals

#: The name the rewritten code calls the converter by (a free variable of every rewritten function).
RUNTIME = "__rp"
_PREFIX = "__rp_"

#: Calls left as written: they depend on the frame they are called from.
_FRAME_CALLS = frozenset({"super", "locals", "globals", "vars", "eval", "exec", "dir"})

#: Top-level packages whose functions are never rewritten.
_LIBRARIES = frozenset({"raypipe", "nvidia", "numpy", "torch", "ray", "cupy", "PIL", "numba", "builtins"})


class Converter:
    """Rewrites functions and runs the rewritten code's control flow; keeps each rewritten code
    object by the original's (code objects compare by content, so the cache survives pickling)."""

    def __init__(self) -> None:
        self.codes: dict[types.CodeType, types.CodeType | None] = {}

    def convert(self, function: Callable) -> Callable:
        """``function`` rewritten (itself where it is not a function of the user's own code); a
        method, or an object's ``__call__``, bound as it was."""
        if isinstance(function, types.MethodType):
            inner = self.convert(function.__func__)
            return function if inner is function.__func__ else types.MethodType(inner, function.__self__)
        if not isinstance(function, (types.FunctionType, type)) and callable(function):
            call = type(function).__call__  # a callable object: its method
            inner = self.convert(call) if isinstance(call, types.FunctionType) else call
            return function if inner is call else types.MethodType(inner, function)
        if not isinstance(function, types.FunctionType) or getattr(function, "__rp_converted__", False):
            return function
        code = function.__code__
        if code not in self.codes:
            self.codes[code] = self._rewrite(function) if _is_users(function) else None
        rewritten = self.codes[code]
        return function if rewritten is None else self._build(function, rewritten)

    def call(self, function: Any, /, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, with the user's own functions rewritten (``function`` is
        positional only: the call may pass its own ``function=``, as ``fn.python_function`` takes)."""
        return self.convert(function)(*args, **kwargs)

    # The rewritten code's control flow (raypipe.conditionals).
    if_stmt = staticmethod(conditionals.if_stmt)
    not_ = staticmethod(conditionals.not_)
    and_ = staticmethod(conditionals.and_)
    or_ = staticmethod(conditionals.or_)
    returned = staticmethod(conditionals.returned)
    Undefined = conditionals.Undefined

    def _rewrite(self, function: types.FunctionType) -> types.CodeType | None:
        try:
            source = textwrap.dedent(inspect.getsource(function))
            tree = ast.parse(source)
        except (OSError, TypeError, SyntaxError, IndentationError) as exc:
            warnings.warn(
                f"enable_conditionals: the source of {function.__qualname__} cannot be read ({exc}: defined with "
                "python -c, at an interactive prompt or by exec?), so it is called as written and an `if` on "
                "pipeline data inside it raises; define it in a file",
                stacklevel=4,
            )
            return None
        definition = tree.body[0] if tree.body else None
        if not isinstance(definition, ast.FunctionDef) or definition.name != function.__name__:
            return None  # a lambda, or a function whose source is not its own definition
        code = function.__code__
        filename = code.co_filename
        try:
            _Rewriter(filename).function(definition)
            definition.decorator_list = []
            _strip_evaluated(definition.args)
            definition.returns = None
            factory = _define(
                f"{_PREFIX}factory",
                [RUNTIME, *code.co_freevars],
                [definition, ast.Return(value=ast.Name(id=definition.name, ctx=ast.Load()))],
            )
            module = ast.Module(body=[factory], type_ignores=[])
            ast.fix_missing_locations(module)
            ast.increment_lineno(module, code.co_firstlineno - 1)
            compiled = compile(module, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, TypeError) as exc:
            warnings.warn(
                f"enable_conditionals: {function.__qualname__} ({filename}) is called as written, not rewritten "
                f"({exc}); an `if` on pipeline data inside it raises",
                stacklevel=4,
            )
            return None
        factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
        return next(
            c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == function.__name__
        )

    def _build(self, function: types.FunctionType, code: types.CodeType) -> types.FunctionType:
        """A function of ``code`` with ``function``'s globals, closure cells, defaults and attributes."""
        original = dict(zip(function.__code__.co_freevars, function.__closure__ or ()))
        cells = tuple(types.CellType(self) if name == RUNTIME else original[name] for name in code.co_freevars)
        rewritten = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__, cells)
        rewritten.__kwdefaults__ = function.__kwdefaults__
        functools.update_wrapper(rewritten, function, updated=())
        rewritten.__dict__.update(function.__dict__)
        rewritten.__rp_converted__ = True
        del rewritten.__wrapped__
        return rewritten


def do_not_convert(func: Callable | None = None) -> Callable:
    """DALI's ``nvidia.dali.pipeline.do_not_convert``: keep ``func`` as written under
    ``enable_conditionals`` (a function that handles no pipeline data, such as a factory of
    external-source callbacks). Usable bare or called: ``@do_not_convert`` or ``@do_not_convert()``."""
    if func is None:
        return do_not_convert
    func.__rp_converted__ = True  # what the converter leaves alone
    return func


def convert(function: Callable) -> Callable:
    """``function`` rewritten for conditionals on pipeline data (see the module's documentation)."""
    return Converter().convert(function)


def _is_users(function: types.FunctionType) -> bool:
    """Whether ``function`` is the user's own code: not raypipe's, a library's, or the standard library's."""
    module = (function.__module__ or "").split(".")[0]
    if module in _LIBRARIES or module in sys.stdlib_module_names:
        return False
    filename = function.__code__.co_filename
    return not any(part in filename for part in ("site-packages", "dist-packages"))


def _strip_evaluated(args: ast.arguments) -> None:
    """Drop what a ``def`` evaluates when it runs (defaults and annotations): the rewritten function
    takes the original's evaluated defaults."""
    args.defaults = []
    args.kw_defaults = [None] * len(args.kwonlyargs)
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            arg.annotation = None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _walk_scope(node: ast.AST):
    """The nodes under ``node`` in its own scope: not inside nested functions, lambdas or classes."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, _SCOPES):
            yield from _walk_scope(child)


def _walk_block(statements: list[ast.stmt]):
    for statement in statements:
        yield statement
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _walk_scope(statement)


def _assigned(statements: list[ast.stmt]) -> list[str]:
    """The names the statements bind in their scope, in order of first appearance."""
    names: dict[str, None] = {}
    for node in _walk_block(statements):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names[node.name] = None
    return [n for n in names if not n.startswith(_PREFIX) or n == conditionals.RETURN_VALUE]


def _mutated(statements: list[ast.stmt]) -> list[str]:
    """The items and attributes the statements assign (``out["image"] = ...``, ``self.x = ...``):
    the branches of an ``if`` on pipeline data cannot merge those."""
    targets = []
    for node in _walk_block(statements):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for part in ast.walk(target):
                    if isinstance(part, (ast.Subscript, ast.Attribute)) and isinstance(part.ctx, ast.Store):
                        targets.append(ast.unparse(part))
    return list(dict.fromkeys(targets))


def _escapes(statement: ast.If) -> bool:
    """Whether the ``if`` leaves its own block other than by ``return`` (``break`` or ``continue``
    of an enclosing loop), declares ``global``/``nonlocal``, or yields: it cannot become functions."""

    def visit(node: ast.AST, in_loop: bool) -> bool:
        for field, value in ast.iter_fields(node):
            inside = in_loop or (isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and field == "body")
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST) or isinstance(child, _SCOPES):
                    continue
                if isinstance(child, (ast.Break, ast.Continue)) and not inside:
                    return True
                if isinstance(child, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await)):
                    return True
                if visit(child, inside):
                    return True
        return False

    return visit(statement, False)


def _has_return(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Return) for n in _walk_scope(node))


def _ends_in_return(block: list[ast.stmt]) -> bool:
    """Whether every path through ``block`` ends in a ``return`` at the end of a branch."""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _ends_in_return(last.body) and _ends_in_return(last.orelse)


def _returns_in_blocks(function: ast.FunctionDef) -> bool:
    """Whether a ``return`` sits inside a loop, ``with`` or ``try`` (left as written: see the module)."""
    for node in _walk_scope(function):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)) and _has_return(node):
            return True
    return False


def _early_returns(block: list[ast.stmt]) -> list[ast.stmt]:
    """``block`` with each ``if`` that returns made the last statement of its block: the statements
    after it are copied into each of its branches that does not end in a ``return``."""
    for i, statement in enumerate(block):
        if isinstance(statement, ast.If) and _has_return(statement):
            rest = block[i + 1 :]
            body = statement.body if _ends_in_return(statement.body) else statement.body + copy.deepcopy(rest)
            orelse = statement.orelse if _ends_in_return(statement.orelse) else statement.orelse + copy.deepcopy(rest)
            statement.body = _early_returns(body)
            statement.orelse = _early_returns(orelse)
            return [*block[:i], statement]
    return block


class _ToAssignment(ast.NodeTransformer):
    """``return x`` as ``__rp_retval = x`` (in the if-tree of a function, see :func:`_early_returns`)."""

    def visit_FunctionDef(self, node):  # noqa: N802  (ast's names)
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef  # noqa: N815

    def visit_Return(self, node):  # noqa: N802
        value = node.value if node.value is not None else ast.Constant(value=None)
        return ast.copy_location(
            ast.Assign(targets=[ast.Name(id=conditionals.RETURN_VALUE, ctx=ast.Store())], value=value), node
        )


class _Expressions(ast.NodeTransformer):
    """``and``, ``or``, ``not`` and calls as calls of the converter."""

    def __init__(self, filename: str):
        self.filename = filename

    def _where(self, node: ast.AST) -> ast.Constant:
        return ast.Constant(value=f"{self.filename}:{getattr(node, 'lineno', '?')}")

    def visit_BoolOp(self, node):  # noqa: N802
        self.generic_visit(node)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node)):
            return node
        first, *rest = node.values
        lazy = [ast.Lambda(args=_no_arguments(), body=value) for value in rest]
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_runtime_call(name, [self._where(node), first, *lazy]), node)

    def visit_UnaryOp(self, node):  # noqa: N802
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(_runtime_call("not_", [node.operand, self._where(node)]), node)

    def visit_Call(self, node):  # noqa: N802
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _FRAME_CALLS:
            return node
        return ast.copy_location(
            ast.Call(func=_runtime_attr("call"), args=[node.func, *node.args], keywords=node.keywords), node
        )


class _Rewriter:
    """Rewrites a function definition in place (and the functions defined inside it)."""

    def __init__(self, filename: str):
        self.filename = filename
        self.count = 0

    def function(self, definition: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        definition.body = [_Expressions(self.filename).visit(s) for s in definition.body]
        self._scope(definition)

    def _scope(self, definition: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        returns = not _returns_in_blocks(definition) and not isinstance(definition, ast.AsyncFunctionDef)
        body = _early_returns(definition.body) if returns else definition.body
        declared = {
            name
            for node in _walk_scope(definition)
            if isinstance(node, (ast.Global, ast.Nonlocal))
            for name in node.names
        }
        definition.body = self._block(body, returns, declared)

    def _block(self, block: list[ast.stmt], returns: bool, declared: set[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in block:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._scope(statement)
                out.append(statement)
            elif isinstance(statement, ast.If):
                out.extend(self._if(statement, returns, declared))
            elif isinstance(statement, ast.ClassDef):
                out.append(statement)
            else:
                for field in ("body", "orelse", "finalbody"):
                    inner = getattr(statement, field, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                        setattr(statement, field, self._block(inner, False, declared))
                for handler in getattr(statement, "handlers", []):
                    handler.body = self._block(handler.body, False, declared)
                out.append(statement)
        return out

    def _if(self, statement: ast.If, returns: bool, declared: set[str]) -> list[ast.stmt]:
        has_return = _has_return(statement)
        if _escapes(statement) or (has_return and not returns) or set(_assigned([statement])) & declared:
            statement.body = self._block(statement.body, False, declared)
            statement.orelse = self._block(statement.orelse, False, declared)
            return [statement]
        if has_return:
            statement = _ToAssignment().visit(statement)
        statement.body = self._block(statement.body, False, declared)
        statement.orelse = self._block(statement.orelse, False, declared)
        converted = self._as_calls(statement)
        if has_return:
            converted.append(ast.Return(value=_runtime_call("returned", [_name(conditionals.RETURN_VALUE)])))
        for node in converted:
            for child in ast.walk(node):
                if "lineno" in child._attributes and not hasattr(child, "lineno"):
                    ast.copy_location(child, statement)
        return converted

    def _as_calls(self, statement: ast.If) -> list[ast.stmt]:
        """The ``if`` as its branches' functions and a call of ``if_stmt``."""
        self.count += 1
        n = self.count
        names = _assigned([statement])
        prelude: list[ast.stmt] = []
        for name in names:  # a variable first bound in a branch starts undefined
            prelude.append(
                ast.Try(
                    body=[ast.Expr(value=_name(name))],
                    handlers=[
                        ast.ExceptHandler(
                            type=_name("NameError"),
                            name=None,
                            body=[
                                ast.Assign(
                                    targets=[ast.Name(id=name, ctx=ast.Store())],
                                    value=_runtime_call("Undefined", [ast.Constant(value=name)]),
                                )
                            ],
                        )
                    ],
                    orelse=[],
                    finalbody=[],
                )
            )
        nonlocal_ = [ast.Nonlocal(names=list(names))] if names else []
        body = _define(f"{_PREFIX}if_body_{n}", [], nonlocal_ + (statement.body or [ast.Pass()]))
        orelse = _define(f"{_PREFIX}if_else_{n}", [], nonlocal_ + (statement.orelse or [ast.Pass()]))
        state = ast.Tuple(elts=[_name(name) for name in names], ctx=ast.Load())
        get_state = _define(f"{_PREFIX}if_get_{n}", [], [ast.Return(value=state)])
        target = ast.Tuple(elts=[ast.Name(id=name, ctx=ast.Store()) for name in names], ctx=ast.Store())
        values = f"{_PREFIX}values"
        set_state = _define(
            f"{_PREFIX}if_set_{n}",
            [values],
            nonlocal_ + ([ast.Assign(targets=[target], value=_name(values))] if names else [ast.Pass()]),
        )
        call = _runtime_call(
            "if_stmt",
            [
                statement.test,
                _name(body.name),
                _name(orelse.name),
                _name(get_state.name),
                _name(set_state.name),
                ast.Tuple(elts=[ast.Constant(value=name) for name in names], ctx=ast.Load()),
                ast.Constant(value=f"{self.filename}:{statement.lineno}"),
            ],
        )
        mutated = _mutated([statement])
        if mutated:
            call.keywords = [
                ast.keyword(
                    arg="mutated", value=ast.Tuple(elts=[ast.Constant(value=m) for m in mutated], ctx=ast.Load())
                )
            ]
        return [*prelude, body, orelse, get_state, set_state, ast.Expr(value=call)]


def _no_arguments() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


def _define(name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    arguments = _no_arguments()
    arguments.args = [ast.arg(arg=p) for p in params]
    generic = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}  # Python 3.12+
    return ast.FunctionDef(name=name, args=arguments, body=body, decorator_list=[], **generic)


def _name(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _runtime_attr(attribute: str) -> ast.Attribute:
    return ast.Attribute(value=_name(RUNTIME), attr=attribute, ctx=ast.Load())


def _runtime_call(attribute: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=_runtime_attr(attribute), args=args, keywords=[])
