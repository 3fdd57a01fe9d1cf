"""Length extrapolation (train short, test long; Press et al. 2022): dev loss of language models at window
lengths that are multiples of the training block size. Import the module you need:

- scoring   the two protocols (windows, sliding), `LengthScore` / `VariantExtrapolation`, `score_length`,
            and the text a run reads (`DevText`: the validation split training used)
- plan      one planner and one runner for the page and the command line (units, work, the check)
- report    rows, sentences and a plain-text table from the numbers; the reproduction notes
- recorded  scores stored in a checkpoint's metadata (by `make checkpoints`), read back when text and weights match

The command line (`python -m core.train.extrapolation extrapolation|record CHECKPOINT...`) is on the train side.
"""
