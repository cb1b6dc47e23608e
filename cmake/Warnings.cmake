# Warning flags applied to every project target (style.md §4.11).
option(MCDC_WERROR "Treat warnings as errors" ON)

set(MCDC_WARNING_FLAGS
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wformat=2 -Wpointer-arith
    -Werror=implicit -Werror=incompatible-pointer-types -Werror=int-conversion
    -Werror=return-type -Werror=format)
if(MCDC_WERROR)
  list(APPEND MCDC_WARNING_FLAGS -Werror)
endif()

# mcdc_target_defaults(<target>): C11, POSIX 2008, project warnings.
function(mcdc_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE ${MCDC_WARNING_FLAGS})
  target_compile_definitions(${tgt} PRIVATE _POSIX_C_SOURCE=200809L)
  set_target_properties(${tgt} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
endfunction()
