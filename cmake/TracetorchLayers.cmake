# Each library of ours has its own include root, so that an include against the direction of the
# layers fails to compile instead of passing review.
#
#   tracetorch_include_root(<target> <folder>)
#
# makes ${PROJECT_BINARY_DIR}/include_roots/<folder>/ hold one symbolic link, <folder> -> the
# source folder, and adds that root to <target>'s PUBLIC include path (build tree only). A file
# then includes "<folder>/x.h" exactly when its target links, directly or through its public
# dependencies, the library that owns <folder>. Nothing else of ours is on the path: the
# repository root never is. Libraries that share a folder (protocol and its proto conversions)
# share its root.
#
# A relative include ("../x.h") would step around the roots; tools/check_includes, run as a test,
# refuses those.
function(tracetorch_include_root target folder)
  string(REPLACE "/" "_" root_name "${folder}")
  set(root "${PROJECT_BINARY_DIR}/include_roots/${root_name}")
  set(link "${root}/${folder}")
  get_filename_component(parent "${link}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}" "${link}" SYMBOLIC)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
