# Install rules and the Debian package (CPack DEB).
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j
#   (cd build && cpack -G DEB)        -> build/mongocdc_<version>-1~deb<N>_<arch>.deb
#
# The package installs under /usr whatever CMAKE_INSTALL_PREFIX says:
#   /usr/bin/mongocdc                          the daemon (stripped)
#   /usr/lib/systemd/system/mongocdc.service   conf/mongocdc.service, ExecStart
#                                              naming the installed binary
#   /etc/mongocdc/mongocdc.yaml                conf/replica-set.yaml (a conffile:
#                                              dpkg keeps local edits on upgrade)
#   /usr/share/doc/mongocdc/                   README.md, copyright, docs/, conf/*.yaml
#                                              examples
# Its Depends line comes from dpkg-shlibdeps on the binary (the shared
# libraries of the release it was built on). packaging/debian/postinst creates
# the system user mongocdc the unit runs as; the unit is not enabled.
#
# `cmake --install` installs the same files under CMAKE_INSTALL_PREFIX, except
# that it never overwrites an existing /etc/mongocdc/mongocdc.yaml.

include(GNUInstallDirs)

set(MCDC_SYSCONFDIR "/etc" CACHE PATH
    "Absolute folder for mongocdc/mongocdc.yaml (the example configuration)")

install(TARGETS mongocdc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The unit names the binary where this install put it: its ExecStart is
# rewritten at install time from the prefix then in force (cpack installs with
# its packaging prefix, /usr).
set(_unit_out ${PROJECT_BINARY_DIR}/packaging/mongocdc.service)
install(CODE "
  file(READ \"${PROJECT_SOURCE_DIR}/conf/mongocdc.service\" _unit)
  string(REPLACE \"/usr/local/bin/mongocdc\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/mongocdc\" _unit \"\${_unit}\")
  file(WRITE \"${_unit_out}\" \"\${_unit}\")
")
install(FILES ${_unit_out} DESTINATION lib/systemd/system)

# The example configuration, kept if one is there already (a package install
# stages into an empty DESTDIR, so the .deb always carries it).
install(CODE "
  set(_cfg \"\$ENV{DESTDIR}${MCDC_SYSCONFDIR}/mongocdc/mongocdc.yaml\")
  if(EXISTS \"\${_cfg}\")
    message(STATUS \"Kept existing: \${_cfg}\")
  else()
    file(INSTALL \"${PROJECT_SOURCE_DIR}/conf/replica-set.yaml\"
         DESTINATION \"${MCDC_SYSCONFDIR}/mongocdc\"
         RENAME mongocdc.yaml PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
  endif()
")

install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Debian's machine-readable copyright file (Debian Policy §12.5)
install(FILES packaging/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
file(GLOB _examples ${PROJECT_SOURCE_DIR}/conf/*.yaml)
install(FILES ${_examples} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# --- CPack: one Debian package ---------------------------------------------
# The Debian release of the build machine goes into the package revision
# (1~deb12, 1~deb13): the Depends line names that release's library packages.
set(_deb_rel "")
if(EXISTS /etc/os-release)
  file(STRINGS /etc/os-release _os_id REGEX "^ID=")
  file(STRINGS /etc/os-release _os_ver REGEX "^VERSION_ID=")
  if(_os_id MATCHES "debian" AND _os_ver MATCHES "\"?([0-9]+)\"?$")
    set(_deb_rel "~deb${CMAKE_MATCH_1}")
  endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mongocdc)
set(CPACK_PACKAGE_VENDOR mongocdc)
set(CPACK_PACKAGE_CONTACT "mongocdc maintainers <dev@mongocdc.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "MongoDB change data capture to Kafka, Debezium-compatible events")
set(CPACK_PACKAGE_DESCRIPTION
    "mongocdc captures inserts, updates, replaces and deletes of a MongoDB replica set or sharded cluster (change streams or the oplog) and publishes them to Apache Kafka as Debezium-compatible keyed events, without a JVM or Kafka Connect. One binary, one YAML file.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_RELEASE "1${_deb_rel}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# passwd (useradd) is essential on Debian; ca-certificates for TLS to MongoDB
# and Kafka.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd, ca-certificates")
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/conffiles.in
               ${PROJECT_BINARY_DIR}/packaging/conffiles @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/packaging/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
