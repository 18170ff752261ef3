# `make package`: a Debian package of gpupool built by CPack (issue 23). What goes where:
#   /usr/bin/gpupool, /usr/bin/gpupool-fetch-traces
#   /usr/lib/gpupool/    gpupool-shim, libgpupool-cuda-cap.so, gpupool-cap-gpu-check, gpupool-scrub (when built):
#                        the agent finds them there (src/base/install_paths.h)
#   /usr/share/gpupool/  scenarios/ (gpupool sim claims finds them), traces/ (the trace manifest)
#   /lib/systemd/system/ gpupool-server.service, gpupool-agent.service (packaging/systemd)
#   /etc/gpupool/server.yaml, /etc/default/gpupool-{server,agent} (conffiles)
#   /usr/share/man/man1/ gpupool.1 and gpupool-SUBCOMMAND.1, made from the CLI's --help by help2man
#   /usr/share/doc/gpupool/ README, docs, examples/production, copyright, changelog
# The package test (tests/package_test.sh) unpacks it and checks all of this.
# cpack and `make install` install what is built; `make package` builds first (the Makefile), so they need not
# build every test and benchmark again.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(GPUPOOL_HELPERS_DIR lib/gpupool)
install(TARGETS gpupool RUNTIME DESTINATION bin)
install(TARGETS gpupool-shim gpupool-cap-gpu-check RUNTIME DESTINATION ${GPUPOOL_HELPERS_DIR})
install(TARGETS gpupool-cuda-cap LIBRARY DESTINATION ${GPUPOOL_HELPERS_DIR})
if(TARGET gpupool-scrub)
  install(TARGETS gpupool-scrub RUNTIME DESTINATION ${GPUPOOL_HELPERS_DIR})
endif()
install(PROGRAMS scripts/fetch-traces.sh DESTINATION bin RENAME gpupool-fetch-traces)
install(FILES scripts/traces/manifest.tsv DESTINATION share/gpupool/traces)
install(PROGRAMS scripts/traces/derive-fgd-summary.py DESTINATION share/gpupool/traces)
install(DIRECTORY scenarios DESTINATION share/gpupool)
install(FILES packaging/systemd/gpupool-server.service packaging/systemd/gpupool-agent.service
        DESTINATION /lib/systemd/system)
install(FILES examples/production/server.yaml DESTINATION /etc/gpupool)
install(FILES packaging/default/gpupool-server packaging/default/gpupool-agent DESTINATION /etc/default)
install(FILES README.md docs/operating.md docs/server.md docs/agent.md docs/scenarios.md
        DESTINATION share/doc/gpupool OPTIONAL)
install(FILES packaging/debian/copyright DESTINATION share/doc/gpupool)
install(DIRECTORY examples/production DESTINATION share/doc/gpupool/examples USE_SOURCE_PERMISSIONS)

# changelog.gz (lintian wants it compressed, reproducibly: gzip -n).
set(GPUPOOL_CHANGELOG ${CMAKE_BINARY_DIR}/package/changelog.gz)
add_custom_command(OUTPUT ${GPUPOOL_CHANGELOG}
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/package
                   COMMAND gzip -9nc ${CMAKE_SOURCE_DIR}/packaging/debian/changelog > ${GPUPOOL_CHANGELOG}
                   DEPENDS ${CMAKE_SOURCE_DIR}/packaging/debian/changelog VERBATIM)

# Man pages from the CLI's own help (help2man), one per subcommand.
find_program(HELP2MAN_PROGRAM help2man)
set(GPUPOOL_MAN_PAGES)
if(HELP2MAN_PROGRAM)
  set(GPUPOOL_MAN_DIR ${CMAKE_BINARY_DIR}/package/man)
  file(MAKE_DIRECTORY ${GPUPOOL_MAN_DIR})
  # page|subcommand|what it does (the NAME line)
  set(GPUPOOL_MAN_LIST
      "gpupool||a control plane for multi-tenant GPU pools"
      "gpupool-server|server|run the gpupool server (REST API, journal, metrics)"
      "gpupool-agent|agent|run a node agent: register the node, heartbeat, run its tasks"
      "gpupool-dev|dev|run a server and one local agent with fake GPUs"
      "gpupool-sim|sim|simulate placement and scheduling on traces or generated workloads"
      "gpupool-job|job|submit, list, inspect and cancel jobs"
      "gpupool-tenant|tenant|create tenants, set quotas, list them"
      "gpupool-node|node|add and list nodes, issue agent tokens"
      "gpupool-pool|pool|list pools and their capacity"
      "gpupool-regions|regions|show or replace the region table")
  # gpupool-fetch-traces's page, from the script's --help.
  file(WRITE ${GPUPOOL_MAN_DIR}/gpupool-fetch-traces.h2m
       "[NAME]\ngpupool-fetch-traces \\- fetch and verify the public traces of gpupool's simulator\n")
  add_custom_command(OUTPUT ${GPUPOOL_MAN_DIR}/gpupool-fetch-traces.1.gz
                     COMMAND ${HELP2MAN_PROGRAM} --no-info --no-discard-stderr --section 1 --source gpupool
                             --include ${GPUPOOL_MAN_DIR}/gpupool-fetch-traces.h2m --version-string=${PROJECT_VERSION}
                             --output ${GPUPOOL_MAN_DIR}/gpupool-fetch-traces.1 ${CMAKE_SOURCE_DIR}/scripts/fetch-traces.sh
                     COMMAND gzip -9nf ${GPUPOOL_MAN_DIR}/gpupool-fetch-traces.1
                     DEPENDS ${CMAKE_SOURCE_DIR}/scripts/fetch-traces.sh VERBATIM)
  list(APPEND GPUPOOL_MAN_PAGES ${GPUPOOL_MAN_DIR}/gpupool-fetch-traces.1.gz)
  foreach(entry IN LISTS GPUPOOL_MAN_LIST)
    string(REPLACE "|" ";" fields "${entry}")
    list(GET fields 0 page)
    list(GET fields 1 sub)
    list(GET fields 2 what)
    string(STRIP "${sub} --help" help_option)
    file(WRITE ${GPUPOOL_MAN_DIR}/${page}.h2m "[NAME]\n${page} \\- ${what}\n")
    add_custom_command(OUTPUT ${GPUPOOL_MAN_DIR}/${page}.1.gz
                       COMMAND ${HELP2MAN_PROGRAM} --no-info --no-discard-stderr --section 1 --source gpupool
                               --include ${GPUPOOL_MAN_DIR}/${page}.h2m "--help-option=${help_option}"
                               --version-option=--version --output ${GPUPOOL_MAN_DIR}/${page}.1 $<TARGET_FILE:gpupool>
                       COMMAND gzip -9nf ${GPUPOOL_MAN_DIR}/${page}.1
                       DEPENDS gpupool VERBATIM)
    list(APPEND GPUPOOL_MAN_PAGES ${GPUPOOL_MAN_DIR}/${page}.1.gz)
  endforeach()
  install(FILES ${GPUPOOL_MAN_PAGES} DESTINATION share/man/man1 OPTIONAL)
endif()
add_custom_target(package_files ALL DEPENDS ${GPUPOOL_CHANGELOG} ${GPUPOOL_MAN_PAGES})
install(FILES ${GPUPOOL_CHANGELOG} DESTINATION share/doc/gpupool OPTIONAL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpupool)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "The gpupool developers <gpupool@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "control plane for multi-tenant GPU pools")
# CPack writes the summary as the synopsis line and indents these lines (an empty one becomes " .").
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "gpupool pools GPUs across nodes, racks and regions, shares them (whole GPUs,
time-sliced shares, MPS, MIG instances), enforces three-tier tenant quotas
with priorities and deadlines, reclaims idle GPUs, scales node pools, and
replays traces through the same scheduling core.

This package has the gpupool binary (server, agent, client and simulator),
the agent's helpers, systemd units for the server and the agent, and an
example production configuration.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "runc, curl, python3")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/postinst ${CMAKE_SOURCE_DIR}/packaging/debian/prerm
    ${CMAKE_SOURCE_DIR}/packaging/debian/postrm ${CMAKE_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
