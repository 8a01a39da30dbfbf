//! Which Keras `tf.keras` is in every task. From TensorFlow 2.16, `tf.keras` is Keras 3, whose
//! `model.fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585) and has no
//! ParameterServerStrategy at all (no `DatasetCreator`, no `ClusterCoordinator`). TensorFlow's
//! documented way back (2.16 release notes) is the `tf_keras` package of TensorFlow's own minor
//! version and `TF_USE_LEGACY_KERAS=1` in the environment before TensorFlow is imported. A
//! variable the user exports does not reach tasks started with `srun --export=NONE` or inside
//! `apptainer exec --cleanenv`; tfcluster sets it in every task of the step, like TF_CONFIG.

/// The variable TensorFlow reads when `tf.keras` is first used (`1`, `true` or `True` count).
pub const VAR: &str = "TF_USE_LEGACY_KERAS";

/// The `keras` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keras {
    /// TensorFlow's own choice (Keras 2 up to 2.15, Keras 3 from 2.16, or what the user's own
    /// `TF_USE_LEGACY_KERAS` says): tfcluster sets nothing.
    Auto,
    /// `tf.keras` is Keras 2 (`tf_keras`) in every task: `TF_USE_LEGACY_KERAS=1`.
    Two,
    /// Keras 3 across processes with `keras.distribution` on its JAX backend: the
    /// `KERAS_DISTRIBUTION_*` variables and JAX's own ([`super::jax`]); `tf.keras` is left
    /// alone.
    Three,
}

impl Keras {
    /// `auto`, `2` or `3`.
    pub fn parse(text: &str) -> Option<Keras> {
        match text {
            "auto" => Some(Keras::Auto),
            "2" => Some(Keras::Two),
            "3" => Some(Keras::Three),
            _ => None,
        }
    }

    /// The value every task gets, NUL-terminated (none: the task's environment is left alone).
    pub fn value_nul(self) -> Option<&'static str> {
        match self {
            Keras::Auto | Keras::Three => None,
            Keras::Two => Some("1\0"),
        }
    }
}
