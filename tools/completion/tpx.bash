# bash completion for tpx — installed by `meson install` into
# <datadir>/bash-completion/completions/tpx.
_tpx() {
  local cur prev cmd
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  cmd=${COMP_WORDS[1]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "plan plugins check-plugin --help --version" -- "$cur"))
    return
  fi
  case $prev in
    --config|--plan) COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur")); return ;;
    --weights) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    --tp|--dp-shard|--dp-replicate) COMPREPLY=($(compgen -W "1 2 4 8 16 32 64" -- "$cur")); return ;;
    --timeout|--threads) return ;;
  esac
  case $cmd in
    plan)
      COMPREPLY=($(compgen -W "--config --weights --tp --dp-shard --dp-replicate --sp --plan --no-fsdp --no-isolation --summary --format --help" -- "$cur")) ;;
    plugins)
      COMPREPLY=($(compgen -W "--format --dir --help" -- "$cur")) ;;
    check-plugin)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "--config --format --timeout --threads --help" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -X '!*.so' -- "$cur") $(compgen -d -- "$cur"))
      fi ;;
  esac
}
complete -F _tpx tpx
