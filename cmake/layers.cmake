# The layers of src/ and what each may use (issue 21; docs/ARCHITECTURE.md
# draws the picture). One static library per layer links exactly the layers
# it may use, and check_layers.cmake, run before anything compiles, refuses a
# source file (tests excepted) that includes a header of a layer its own may
# not use, naming the file, the line and the allowed layers.
set(GPUPOOL_LAYERS base http model sched engine control config sim api server agent client cli)
set(GPUPOOL_USES_base "")
set(GPUPOOL_USES_http base)
set(GPUPOOL_USES_model base)
set(GPUPOOL_USES_sched base model)
set(GPUPOOL_USES_engine base model sched)
set(GPUPOOL_USES_control base model sched engine)
set(GPUPOOL_USES_config base model sched engine control)
set(GPUPOOL_USES_sim base model sched engine control config)
set(GPUPOOL_USES_api base model engine)
set(GPUPOOL_USES_server base http model sched engine control config api)
set(GPUPOOL_USES_agent base http model api)
set(GPUPOOL_USES_client base)
set(GPUPOOL_USES_cli base http model sched engine control config sim api server agent client)
