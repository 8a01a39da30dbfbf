"""Keras Tuner's distributed search as its guide writes it ("Distributed hyperparameter
tuning"): the same program in every process, a RandomSearch whose oracle runs in the chief and
whose trials run in the tuners, configured only by the KERASTUNER_* variables tfcluster's
tuner=yes sets. Usage: tuner_search.py DIR TRIALS. Prints, from each tuner, RAN|<tuner id>|<trial
id> for every trial it ran and, from the chief once the search is over,
    ORACLE|<tuner id>|<trials>|<trial id>:<status>,... (every trial the oracle knows)
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import keras_tuner  # noqa: E402
import numpy as np  # noqa: E402

directory, trials = sys.argv[1], int(sys.argv[2])
tuner_id = os.environ["KERASTUNER_TUNER_ID"]
rng = np.random.default_rng(3)
x = rng.random((128, 8), dtype=np.float32)
y = (x @ np.arange(1, 9, dtype=np.float32) / 8.0).astype(np.float32)


def build(hp):
    model = keras.Sequential([
        keras.Input((8,)),
        keras.layers.Dense(hp.Int("units", 4, 64, step=4), activation="relu"),
        keras.layers.Dense(1),
    ])
    model.compile(optimizer=keras.optimizers.SGD(hp.Float("lr", 1e-3, 1e-1, sampling="log")), loss="mse")
    return model


class Recording(keras_tuner.RandomSearch):
    def run_trial(self, trial, *args, **kwargs):
        print(f"RAN|{tuner_id}|{trial.trial_id}", flush=True)
        return super().run_trial(trial, *args, **kwargs)


tuner = Recording(build, objective="val_loss", max_trials=trials, directory=directory,
                  project_name="search", seed=1)
tuner.search(x, y, epochs=1, validation_split=0.25, verbose=0)
if tuner_id == "chief":
    known = tuner.oracle.trials
    statuses = ",".join(f"{t}:{known[t].status}" for t in sorted(known))
    print(f"ORACLE|{tuner_id}|{len(known)}|{statuses}", flush=True)
