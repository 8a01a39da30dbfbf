//! What wakes the holder ([`super::holder`]): inotify on its directory and an eventfd for its
//! stop, the raw system calls of its thread in one place.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

/// What wakes the holder: a file renamed into its directory or removed from it (inotify), or
/// its stop (an eventfd, written by [`super::holder::Holder`]'s drop).
pub struct Watch {
    inotify: OwnedFd,
    wake: OwnedFd,
}

impl Watch {
    /// The watch on `dir`, and the stop's other end for the [`super::holder::Holder`].
    pub fn new(dir: &Path) -> Result<(Watch, OwnedFd), String> {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|e| e.to_string())?;
        let fd = |raw: c_int, what: &str| match raw {
            -1 => Err(format!("{what}: {}", std::io::Error::last_os_error())),
            // SAFETY: a descriptor the call just made, owned by nobody else.
            raw => Ok(unsafe { OwnedFd::from_raw_fd(raw) }),
        };
        // SAFETY: plain flags.
        let inotify = fd(
            unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) },
            "inotify",
        )?;
        // SAFETY: a live inotify descriptor and a NUL-terminated path.
        let added = unsafe {
            libc::inotify_add_watch(
                inotify.as_raw_fd(),
                path.as_ptr(),
                libc::IN_MOVED_TO | libc::IN_DELETE,
            )
        };
        if added < 0 {
            return Err(format!("inotify: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: plain flags.
        let wake = fd(
            unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) },
            "eventfd",
        )?;
        let other = wake.try_clone().map_err(|e| e.to_string())?;
        Ok((Watch { inotify, wake }, other))
    }

    /// Sleeps until a file arrives, the holder is stopped, or `timeout` passes; drains what
    /// woke it.
    pub fn wait(&self, timeout: Option<Duration>) {
        let mut fds = [self.inotify.as_raw_fd(), self.wake.as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as c_int);
        // SAFETY: two valid pollfd entries that outlive the call.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        let mut buffer = [0u8; 4096];
        for fd in [&self.inotify, &self.wake] {
            // SAFETY: a nonblocking read into a buffer of that length, which outlives the call.
            let _ = unsafe { libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
        }
    }
}
