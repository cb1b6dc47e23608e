# Conformance suite of the MongoDB simulator (tests/mongosim): pytest driving the simulator
# through pymongo and a libmongoc probe built by the suite itself.
add_test(NAME mongosim_conformance
         COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/mongosim/tests)
# Measured: about 100 s alone, about 220 s on two cores next to the integration suite (ctest
# -j2 runs them together) with one more busy process; 300 s was too close. Each test has its
# own bound in conftest.py (a hung test dumps its stacks and ends the run), so this is only
# the backstop for the run as a whole.
set_tests_properties(mongosim_conformance PROPERTIES LABELS integration TIMEOUT 900)
