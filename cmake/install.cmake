# What `cmake --install build --prefix P` puts where (docs/INSTALL.md): the programs in
# P/bin, libcomfy_participant.so in P/lib with its C header, a CMake package and a
# pkg-config file; the Python package, the ComfyUI custom node, the examples (the demo
# runs from them), the config's JSON Schema and the deployment files (Prometheus, Grafana,
# Kubernetes) under P/share/comfy-supervisor; the systemd unit in P/lib/systemd/system and
# its user in P/lib/sysusers.d; the docs in P/share/doc/comfy_supervisor. Tests and
# benchmarks are never installed.
include(CMakePackageConfigHelpers)
include(${CMAKE_CURRENT_LIST_DIR}/rewrite_paths.cmake)

set(COMFY_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING
    "Where the systemd unit goes, relative to the prefix (or absolute)")
set(COMFY_SYSUSERS_DIR lib/sysusers.d CACHE STRING
    "Where the systemd-sysusers file of the unit's user goes, relative to the prefix (or absolute)")
set(comfy_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/comfy_supervisor)
set(comfy_share_dir ${CMAKE_INSTALL_DATADIR}/comfy-supervisor)

install(TARGETS comfy-supervisor comfy-worker comfyctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The participant library as comfy_supervisor::participant, its header as
# <comfy_supervisor/participant_c_api.h>.
set_target_properties(comfy_participant PROPERTIES EXPORT_NAME participant)
target_include_directories(comfy_participant INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS comfy_participant EXPORT comfy_supervisor_targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/worker/participant_c_api.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/comfy_supervisor)
install(EXPORT comfy_supervisor_targets NAMESPACE comfy_supervisor:: FILE comfy_supervisorTargets.cmake
        DESTINATION ${comfy_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/comfy_supervisorConfig.cmake.in
    ${CMAKE_BINARY_DIR}/install/comfy_supervisorConfig.cmake INSTALL_DESTINATION ${comfy_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/comfy_supervisorConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/comfy_supervisorConfig.cmake
              ${CMAKE_BINARY_DIR}/install/comfy_supervisorConfigVersion.cmake
        DESTINATION ${comfy_cmake_dir})

# pkg-config: the prefix found from the .pc file's own folder, so the tree can move.
file(RELATIVE_PATH comfy_pc_to_prefix ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" comfy_pc_to_prefix "${comfy_pc_to_prefix}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/comfy_participant.pc.in ${CMAKE_BINARY_DIR}/install/comfy_participant.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install/comfy_participant.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python package and the custom node, beside each other (the custom node finds the
# package there through its link), and where the installed package finds the library.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/worker/python/comfy_supervisor ${PROJECT_SOURCE_DIR}/worker/python/comfyui_custom_node
        DESTINATION ${COMFY_INSTALL_PYTHONDIR} FILES_MATCHING PATTERN "*.py")
cmake_path(ABSOLUTE_PATH COMFY_INSTALL_PYTHONDIR BASE_DIRECTORY ${CMAKE_INSTALL_PREFIX} OUTPUT_VARIABLE comfy_python_dir)
file(RELATIVE_PATH comfy_package_to_libdir ${comfy_python_dir}/comfy_supervisor ${CMAKE_INSTALL_FULL_LIBDIR})
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/install/_installed.py CONTENT
"\"\"\"Written by cmake --install: where libcomfy_participant.so is, relative to the folder of the package comfy_supervisor.\"\"\"
LIBRARY = \"${comfy_package_to_libdir}/$<TARGET_FILE_NAME:comfy_participant>\"
")
install(FILES ${CMAKE_BINARY_DIR}/install/_installed.py DESTINATION ${COMFY_INSTALL_PYTHONDIR}/comfy_supervisor/participant)

# The examples: the demo's config (its paths made those of the installed tree), workload,
# packs and stand-in host, with the bridge test pack and the model of ComfyUI it needs.
install(FILES ${PROJECT_SOURCE_DIR}/examples/workload.json ${PROJECT_SOURCE_DIR}/examples/host_participant.py
              ${PROJECT_SOURCE_DIR}/examples/trace.jsonl
        DESTINATION ${COMFY_INSTALL_EXAMPLESDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/packs DESTINATION ${COMFY_INSTALL_EXAMPLESDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tests/packs/bridge_pack DESTINATION ${COMFY_INSTALL_EXAMPLESDIR}/packs
        FILES_MATCHING PATTERN "*.py")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tests/host/fake_comfyui DESTINATION ${COMFY_INSTALL_EXAMPLESDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "*.md")
cmake_path(ABSOLUTE_PATH COMFY_INSTALL_EXAMPLESDIR BASE_DIRECTORY ${CMAKE_INSTALL_PREFIX} OUTPUT_VARIABLE comfy_examples_dir)
file(RELATIVE_PATH comfy_examples_to_bin ${comfy_examples_dir} ${CMAKE_INSTALL_FULL_BINDIR})
file(RELATIVE_PATH comfy_examples_to_python ${comfy_examples_dir} ${comfy_python_dir})
comfy_rewrite_paths(${PROJECT_SOURCE_DIR}/examples/demo.json ${CMAKE_BINARY_DIR}/install/demo.json
    "../build/bin/" "${comfy_examples_to_bin}/"
    "../tests/packs/bridge_pack" "packs/bridge_pack"
    "../tests/host/fake_comfyui" "fake_comfyui"
    "../worker/python" "${comfy_examples_to_python}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/demo.json)
install(FILES ${CMAKE_BINARY_DIR}/install/demo.json DESTINATION ${COMFY_INSTALL_EXAMPLESDIR})

# The systemd unit, its ExecStart made the installed comfy-supervisor's. The prefix is
# known only when installing, so the unit is written then, straight into place.
if(IS_ABSOLUTE ${COMFY_SYSTEMD_UNITDIR})
    set(comfy_unit_dir ${COMFY_SYSTEMD_UNITDIR})
else()
    set(comfy_unit_dir "\${CMAKE_INSTALL_PREFIX}/${COMFY_SYSTEMD_UNITDIR}")
endif()
install(CODE "
    include(${CMAKE_CURRENT_LIST_DIR}/rewrite_paths.cmake)
    set(unit \"\$ENV{DESTDIR}${comfy_unit_dir}/comfy-supervisor@.service\")
    message(STATUS \"Installing: \${unit}\")
    comfy_rewrite_paths(${PROJECT_SOURCE_DIR}/deploy/systemd/comfy-supervisor@.service \"\${unit}\"
        /usr/local/bin/comfy-supervisor \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/comfy-supervisor\")
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${unit}\")
")
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/comfy-supervisor.sysusers DESTINATION ${COMFY_SYSUSERS_DIR}
        RENAME comfy-supervisor.conf)
# The config's JSON Schema, for editors and CI (docs/CONFIG.md, "The JSON Schema").
install(FILES ${PROJECT_SOURCE_DIR}/supervisor/config/config.schema.json DESTINATION ${comfy_share_dir})
# The Prometheus, Grafana and Kubernetes files as they are.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/grafana
                  ${PROJECT_SOURCE_DIR}/deploy/kubernetes
        DESTINATION ${comfy_share_dir}/deploy)

install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
