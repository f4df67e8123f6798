# bash completion for distrun(1): options and their values, the verbs (kv, barrier, progress, stacks,
# status, check) and, after --
# or the first word that is not an option, the worker command.
# Installed as share/bash-completion/completions/distrun; it also works when sourced on its own.

# Keep in step with the option table (launcher/config/options.cc, command_line.cc) and the verbs;
# tests/integration/completion_test.py checks these lists against `distrun --help`, `distrun kv --help` and
# `distrun check --help`.
_distrun_flags="-h --help --detect --dry-run --version -v --verbose"
_distrun_value_options="--config --cluster-detection-method --coordinator-address --coordinator-port
  --num-processes --process-id --num-nodes --node-rank --local-device-ids --nproc-per-node --launch-mode
  --gpus-per-worker --device-binding --export --run-id --max-restarts --nnodes --elastic-policy --scale-up
  --scale-up-notice --change-signal --recovery --recovery-timeout --join --standby-port --node-check --node-check-timeout --format --log-level --grace-period
  --timeout --forward-signals --tag-output --tag-template --log-dir --ranks-filter --local-ranks-filter
  --redirects --tee --role --token-file
  --heartbeat-timeout --hang-timeout --stall-warning --straggler-threshold --metrics-address
  --metrics-token-file --initialization-timeout --coordinator-bind-address
  --cpu-bind --torch-store --munge --munge-socket
  --hosts -H --hostfile --ssh-args --ssh-concurrency --ssh-connect-timeout --remote-distrun --forward-env -x"
_distrun_verbs="kv barrier progress stacks status check"
_distrun_kv_verbs="set get try-get wait add cas del ls"
# distrun check [DISTRUN-OPTIONS] [-- CHECK-OPTIONS]: the options of its NCCL worker, after --.
_distrun_check_options="--min-bytes --max-bytes --factor --warmup --iters --min-busbw"

# Values of one option, for the word being completed ($2); comma lists complete their last item.
_distrun_values() {
    local option=$1 cur=$2 words="" list=""
    case $option in
        --cluster-detection-method)
            words="auto deactivate local ompi pmi mpi slurm tpu k8s lsf flux torchelastic" ;;
        --format) words="text json yaml env" ;;
        --launch-mode) words="auto per-task per-node" ;;
        --nproc-per-node) words="auto gpu cpu" ;;
        --node-rank) words="auto" ;;
        --redirects | --tee) words="0 1 2 3" ;;
        --device-binding) words="auto none" ;;
        --tag-output) words="auto on off" ;;
        --cpu-bind) words="none gpu numa" ;;
        --torch-store) words="distrun rank0" ;;
        --munge) words="auto off require" ;;
        --elastic-policy) words="resize spares" ;;
        --scale-up) words="never next-restart now" ;;
        --recovery) words="restart in-process" ;;
        --change-signal) words="USR1 USR2 HUP INT TERM QUIT ALRM CONT WINCH URG PWR none" ;;
        --log-level) words="trace debug info warn error off" ;;
        --hang-timeout) words="auto off" ;;
        --stall-warning) words="off" ;;
        --export) list="torch jax keras distrun" ;;
        --forward-signals) list="USR1 USR2 HUP INT TERM QUIT ALRM CONT WINCH URG PWR none" ;;
        --hosts | -H)
            # Hosts from ~/.ssh/config and known_hosts, as bash-completion's own _known_hosts_real offers them.
            if declare -F _known_hosts_real >/dev/null; then
                local last=${cur##*,} done_part=""
                [[ $cur == *,* ]] && done_part=${cur%,*},
                _known_hosts_real -- "$last"
                COMPREPLY=("${COMPREPLY[@]/#/$done_part}")
                compopt -o nospace 2>/dev/null
            fi
            return ;;
        --forward-env | -x)
            mapfile -t COMPREPLY < <(compgen -e -- "$cur")
            return ;;
        --config | --token-file | --munge-socket | --hostfile | --remote-distrun | --metrics-token-file)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return ;;
        --log-dir)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -d -- "$cur")
            return ;;
        *) COMPREPLY=(); return ;;  # numbers, addresses, ids: nothing to offer
    esac
    if [[ -n $list ]]; then
        local done_part="" last=$cur
        if [[ $cur == *,* ]]; then
            done_part=${cur%,*},
            last=${cur##*,}
        fi
        compopt -o nospace 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -P "$done_part" -W "$list" -- "$last")
        return
    fi
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
}

# The worker command from word $1 on: bash-completion's own completion for that command where loaded.
_distrun_command() {
    local start=$1 cur=$2
    if declare -F _command_offset >/dev/null; then
        _command_offset "$start"
    elif ((COMP_CWORD == start)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
        compopt -o default 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
}

# distrun kv VERB KEY..., distrun barrier NAME [--timeout S], distrun stacks [--timeout S] [--full]
# [--output FILE]: the kv verbs and the verbs' options.
_distrun_verb() {
    local verb=$1 cur=$2 i sub=""
    if [[ $verb == kv ]]; then
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} != -* ]]; then sub=${COMP_WORDS[i]}; break; fi
        done
    fi
    COMPREPLY=()
    if [[ ${COMP_WORDS[COMP_CWORD - 1]} == --timeout ]]; then
        return  # seconds
    fi
    if [[ $verb == kv && -z $sub ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$_distrun_kv_verbs" -- "$cur")
        return
    fi
    if [[ $cur == -* && ($verb == barrier || $sub == get || $sub == wait) ]]; then
        mapfile -t COMPREPLY < <(compgen -W "--timeout" -- "$cur")
    elif [[ $cur == -* && $verb == stacks ]]; then
        [[ ${COMP_WORDS[COMP_CWORD - 1]} == --output ]] && return
        mapfile -t COMPREPLY < <(compgen -W "--timeout --full --output" -- "$cur")
    elif [[ $verb == stacks && ${COMP_WORDS[COMP_CWORD - 1]} == --output ]]; then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
}

_distrun() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev="" option="" i word
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    # --option=value, split at = (COMP_WORDBREAKS has it by default) or not.
    if [[ $cur == = && $prev == --* ]]; then
        option=$prev
        cur=""
    elif [[ $prev == = ]] && ((COMP_CWORD >= 2)); then
        option=${COMP_WORDS[COMP_CWORD - 2]}
    elif [[ $cur == --*=* ]]; then
        option=${cur%%=*}
        _distrun_values "$option" "${cur#*=}"
        local j
        for j in "${!COMPREPLY[@]}"; do COMPREPLY[j]=$option=${COMPREPLY[j]}; done
        return
    elif [[ " $_distrun_value_options " == *[[:space:]]"$prev"[[:space:]]* ]]; then
        option=$prev
    fi

    # Where are we: a verb, the worker command, or distrun's own options?
    local check=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word == -- && -n $check ]]; then
            # The check's own options; their values (sizes, counts) are the user's.
            if [[ $cur == -* && " $_distrun_check_options " != *" ${COMP_WORDS[COMP_CWORD - 1]} "* ]]; then
                mapfile -t COMPREPLY < <(compgen -W "$_distrun_check_options" -- "$cur")
            fi
            return
        elif [[ $word == -- ]]; then
            _distrun_command $((i + 1)) "$cur"
            return
        elif [[ $word == = ]]; then
            ((i++))  # the value of --option=value
        elif [[ $word == -* ]]; then
            if [[ $word != *=* && " $_distrun_value_options " == *[[:space:]]"$word"[[:space:]]* &&
                ${COMP_WORDS[i + 1]} != = ]]; then
                ((i++))  # the option's value
            fi
        elif ((i == 1)) && [[ $word == check ]]; then
            check=1  # distrun's own options follow, as for a launch
        elif ((i == 1)) && [[ " $_distrun_verbs " == *" $word "* ]]; then
            _distrun_verb "$word" "$cur"
            return
        elif [[ -n $check ]]; then
            return  # check takes no command
        else
            _distrun_command "$i" "$cur"
            return
        fi
    done

    if [[ -n $option ]]; then
        _distrun_values "$option" "$cur"
    elif [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$_distrun_flags $_distrun_value_options --" -- "$cur")
    elif [[ -n $check ]]; then
        :  # nothing but options
    elif ((COMP_CWORD == 1)); then
        # The verbs, or the start of a worker command (distrun python train.py).
        mapfile -t COMPREPLY < <(compgen -W "$_distrun_verbs" -- "$cur")
        [[ -n $cur ]] && mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -c -- "$cur")
    elif [[ -n $cur ]]; then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    fi
}

complete -F _distrun distrun
