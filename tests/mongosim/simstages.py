"""Document stages shared by change streams, aggregate and pipeline updates ($match,
$project, $addFields/$set, $unset, $replaceRoot/$replaceWith): split out of simstream, which
re-exports apply_stage and eval_expr."""

import copy

import simexpr
import simquery
import simvalue
from simvalue import SimError


def eval_expr(expr, doc):
    """Aggregation expression expr evaluated against doc (simexpr.py lists the operators);
    simexpr.REMOVE for $$REMOVE or a missing array element."""
    return simexpr.evaluate(expr, doc)


def _set_or_remove(doc, path, value):
    if value is simexpr.REMOVE:
        simvalue.unset_path(doc, path)
    else:
        simvalue.set_path(doc, path, value)


def apply_stage(stage, docs):
    """Apply one document-transform/filter stage to a list of documents."""
    name, arg = next(iter(stage.items()))
    if name == "$match":
        return [d for d in docs if simquery.matches(d, arg)]
    if name == "$project":
        out = []
        for d in docs:
            if any(isinstance(v, (dict, str)) and not (isinstance(v, dict) and "$literal" in v) for v in arg.values()):
                base = simquery.project(d, {k: v for k, v in arg.items() if not isinstance(v, (dict, str))} or {"_id": arg.get("_id", 1)})
                for k, v in arg.items():
                    if isinstance(v, (dict, str)):
                        _set_or_remove(base, k, eval_expr(v, d))
                out.append(base)
            else:
                out.append(simquery.project(d, arg))
        return out
    if name in ("$addFields", "$set"):
        out = []
        for d in docs:
            n = copy.deepcopy(d)
            for k, v in arg.items():
                _set_or_remove(n, k, eval_expr(v, d))
            out.append(n)
        return out
    if name == "$unset":
        fields = [arg] if isinstance(arg, str) else arg
        out = []
        for d in docs:
            n = copy.deepcopy(d)
            for f in fields:
                simvalue.unset_path(n, f)
            out.append(n)
        return out
    if name in ("$replaceRoot", "$replaceWith"):
        expr = arg["newRoot"] if name == "$replaceRoot" else arg
        out = []
        for d in docs:
            r = eval_expr(expr, d)
            if not isinstance(r, dict):
                raise SimError(40228, "Location40228",
                               "'newRoot' expression must evaluate to an object, but resulting value was: %r" % (r,))
            out.append(r)
        return out
    if name == "$changeStreamSplitLargeEvent":
        return docs
    raise SimError(40324, "Location40324", "Unrecognized pipeline stage name: '%s'" % name)
