"""Compatibility names for the simulator modules that still `import simbson as sb`.

The BSON value code lives in four modules: simvalue (codec, SimError, BSON undefined, type
order and comparison, dotted paths), simquery (query matching, `_id` range lookups, sort,
projection), simupdate (update operators, `$v: 2` oplog diffs, updateDescription) and simtoken
(KeyString resume tokens, oplog timestamp keys). New code imports from those. This module
re-exports their public names, and the two private helpers simcommands uses, for simserver,
simshard and simcommands, which reach them as `sb.<name>`; it adds nothing of its own.
"""

from simvalue import (CODEC, DECODE_CODEC, SimError, UNDEFINED, Undefined, _num, bad_value,  # noqa: F401
                      bson_type_num, canon, cmp_num, cmp_values, decode, encode, get_field,
                      get_path_values, has_path, id_key, identical, set_path, unset_path,
                      values_equal)
from simquery import (eval_expr, id_index_find, id_index_plan, match_field, matches,  # noqa: F401
                      project, sort_docs)
from simupdate import (_add_nums, apply_update, compute_diff, diff_to_update_description,  # noqa: F401
                       diff_to_v1, expand_positional, is_operator_update, modifier_diff)
from simtoken import key_ts, ks_value, make_token, parse_token, ts_key  # noqa: F401
