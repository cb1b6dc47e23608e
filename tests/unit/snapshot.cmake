# snapshot: `_id` key ranges (brackets, filters, BSON-order comparison, JSON form)
# and the split of one collection into ranges.
if(TARGET mcdc_snapshot)
  mcdc_unit_test(test_keyrange SOURCES test_keyrange.c LIBS mcdc_snapshot)
endif()
