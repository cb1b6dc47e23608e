# Conformance suite of the MongoDB simulator (tests/mongosim): pytest driving the simulator
# through pymongo and a libmongoc probe built by the suite itself.
add_test(NAME mongosim_conformance
         COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/mongosim/tests)
set_tests_properties(mongosim_conformance PROPERTIES LABELS integration TIMEOUT 300)
