# The optional features that `distrun --version` lists (launcher/version.cc). A component that finds what it
# needs sets DISTRUN_WITH_<NAME> to a true value: DISTRUN_WITH_NCCL for the NCCL helper. The definitions
# are made when the top directory has been read, so it does not matter where that component is included.
function(distrun_define_features)
  foreach(feature NCCL)
    if(DISTRUN_WITH_${feature})
      set_property(SOURCE ${PROJECT_SOURCE_DIR}/launcher/version.cc APPEND PROPERTY
        COMPILE_DEFINITIONS DISTRUN_WITH_${feature}=1)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL distrun_define_features)
