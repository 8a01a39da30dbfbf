//! The kernel's firewall: a step's tables through the kernel's own netlink messages
//! ([`install`], [`delete_table`], [`set_ports`], [`node_tables`]), and through libnftables,
//! loaded with `dlopen` only where it is needed (the job's holder of ended tables,
//! `--tf-cluster=check`, a script the core's messages do not cover): the plugin itself keeps
//! needing nothing but libc (tests/abi.rs), and a node without libnftables is a clear error
//! there alone. The library runs the same scripts as
//! the `nft` program, from a buffer, in one transaction, with its errors returned in a buffer;
//! no program is started.
//!
//! The prototypes are libnftables' public API (libnftables(3)): `nft_ctx_new(uint32_t flags)`,
//! `nft_ctx_free`, `nft_ctx_buffer_output`/`nft_ctx_buffer_error` (0 on success),
//! `nft_ctx_get_output_buffer`/`nft_ctx_get_error_buffer`, `nft_run_cmd_from_buffer` (0 on
//! success).

use crate::spank::handle::c_string;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The library's soname: Debian's libnftables1, RHEL's nftables package.
pub const LIBRARY: &str = "libnftables.so.1";

type NewFn = unsafe extern "C" fn(u32) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type BufferFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type GetBufferFn = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type RunFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;
type GetFlagsFn = unsafe extern "C" fn(*mut c_void) -> u32;
type SetFlagsFn = unsafe extern "C" fn(*mut c_void, u32);

/// One libnftables context, with output and errors captured.
pub struct Nft {
    /// The library's handle, given back by [`Nft::release`].
    lib: *mut c_void,
    /// The netfilter netlink sockets the process had before the context was made (their
    /// inodes): any other one is the context's ([`Nft::release`]).
    before: Vec<u64>,
    ctx: *mut c_void,
    free: FreeFn,
    run: RunFn,
    output: GetBufferFn,
    error: GetBufferFn,
}

impl Nft {
    /// Loads the library (once per process; it stays loaded) and makes a context.
    pub fn open() -> Result<Nft, String> {
        netlink_socket_free()?;
        let name = CString::new(LIBRARY).expect("no NUL");
        // SAFETY: a valid C string; RTLD_LOCAL keeps its symbols out of slurmstepd's namespace.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!("cannot load {LIBRARY}: {}", dl_error()));
        }
        let symbol = |name: &CStr| -> Result<*mut c_void, String> {
            // SAFETY: `lib` is a live handle and `name` a valid C string.
            let found = unsafe { libc::dlsym(lib, name.as_ptr()) };
            if found.is_null() {
                Err(format!("{LIBRARY} has no {}", name.to_string_lossy()))
            } else {
                Ok(found)
            }
        };
        // SAFETY: (each transmute) the symbol is the libnftables function of that name, whose C
        // prototype the function type spells (see the module's doc).
        let (new, free, buffer_output, buffer_error, output, error, run) = unsafe {
            (
                std::mem::transmute::<*mut c_void, NewFn>(symbol(c"nft_ctx_new")?),
                std::mem::transmute::<*mut c_void, FreeFn>(symbol(c"nft_ctx_free")?),
                std::mem::transmute::<*mut c_void, BufferFn>(symbol(c"nft_ctx_buffer_output")?),
                std::mem::transmute::<*mut c_void, BufferFn>(symbol(c"nft_ctx_buffer_error")?),
                std::mem::transmute::<*mut c_void, GetBufferFn>(symbol(
                    c"nft_ctx_get_output_buffer",
                )?),
                std::mem::transmute::<*mut c_void, GetBufferFn>(symbol(
                    c"nft_ctx_get_error_buffer",
                )?),
                std::mem::transmute::<*mut c_void, RunFn>(symbol(c"nft_run_cmd_from_buffer")?),
            )
        };
        let before = netfilter_sockets()
            .into_iter()
            .map(|(_, inode)| inode)
            .collect();
        // SAFETY: NFT_CTX_DEFAULT (0).
        let ctx = unsafe { new(0) };
        if ctx.is_null() {
            return Err(format!("{LIBRARY} could not make a context"));
        }
        let nft = Nft {
            lib,
            before,
            ctx,
            free,
            run,
            output,
            error,
        };
        // SAFETY: a live context.
        if unsafe { buffer_output(ctx) } != 0 || unsafe { buffer_error(ctx) } != 0 {
            return Err(format!("{LIBRARY} could not buffer its output"));
        }
        close_on_exec_netfilter_sockets();
        Ok(nft)
    }

    /// Runs `script` (nft's syntax) as one transaction; its output, or its error text.
    pub fn run(&mut self, script: &str) -> Result<String, String> {
        let script = CString::new(script).map_err(|_| "the script has a NUL byte".to_string())?;
        netlink_socket_free()?;
        // SAFETY: a live context and a valid C string that outlives the call.
        let rc = unsafe { (self.run)(self.ctx, script.as_ptr()) };
        close_on_exec_netfilter_sockets(); // a library that opens its socket late
        if rc == 0 {
            Ok(self.buffer(self.output))
        } else {
            let error = self.buffer(self.error);
            Err(match error.trim() {
                "" => format!("nftables refused the rules (error {rc})"),
                text => text.lines().next().unwrap_or(text).to_string(),
            })
        }
    }

    /// Reads and writes libnftables' JSON instead of nft's syntax while `on`
    /// (`nft_ctx_output_set_flags` with `NFT_CTX_OUTPUT_JSON`, 1 << 4: libnftables parses a
    /// script as JSON first while that flag is set, from 0.9.1 on). The plugin hands its rules
    /// over as text; benches/firewall.rs measures this other way against it.
    pub fn set_json(&mut self, on: bool) -> Result<(), String> {
        const JSON: u32 = 1 << 4;
        let name = CString::new(LIBRARY).expect("no NUL");
        // SAFETY: a valid C string; RTLD_NOLOAD only finds the library `open` loaded.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if lib.is_null() {
            return Err(format!("{LIBRARY} is not loaded"));
        }
        // SAFETY: a live handle and valid C strings.
        let (get, set) = unsafe {
            (
                libc::dlsym(lib, c"nft_ctx_output_get_flags".as_ptr()),
                libc::dlsym(lib, c"nft_ctx_output_set_flags".as_ptr()),
            )
        };
        let result = if get.is_null() || set.is_null() {
            Err(format!("{LIBRARY} cannot set its output flags"))
        } else {
            // SAFETY: the symbols are libnftables' `unsigned int
            // nft_ctx_output_get_flags(struct nft_ctx *)` and `void
            // nft_ctx_output_set_flags(struct nft_ctx *, unsigned int)`, called on a live
            // context.
            unsafe {
                let get = std::mem::transmute::<*mut c_void, GetFlagsFn>(get);
                let set = std::mem::transmute::<*mut c_void, SetFlagsFn>(set);
                let flags = get(self.ctx);
                set(self.ctx, if on { flags | JSON } else { flags & !JSON });
            }
            Ok(())
        };
        // SAFETY: the reference RTLD_NOLOAD took, given back once; `open`'s stays.
        unsafe { libc::dlclose(lib) };
        result
    }

    /// Whether this libnftables may know the table flag `persist` (Linux 6.9, 2024): only a
    /// library that has `nft_ctx_input_get_flags` (`LIBNFTABLES_4`, nftables 1.0.7, 2023) can,
    /// so one without it is never given the word. Debian 12's 1.0.6 refused it only after
    /// parsing the whole script, which cost as much as installing it (docs/performance.md);
    /// a library that has the call but not the word still refuses it, and the caller falls back.
    pub fn may_persist(&self) -> bool {
        // SAFETY: a live handle and a valid C string.
        !unsafe { libc::dlsym(self.lib, c"nft_ctx_input_get_flags".as_ptr()) }.is_null()
    }

    /// Keeps only the context's netlink socket, which owns the tables made through it, and
    /// lets go of the rest: the context is freed, the library unloaded where nothing else holds
    /// it, and the memory given back. slurmstepd then forks its tasks without libnftables'
    /// mappings and heap, which every fork copies and every exit unmaps (measured in
    /// docs/performance.md). `Err(self)`, still whole, where the context's socket cannot be
    /// told apart (none new, or more than one).
    pub fn release(self) -> Result<OwnerSocket, Nft> {
        let new: Vec<c_int> = netfilter_sockets()
            .into_iter()
            .filter(|(_, inode)| !self.before.contains(inode))
            .map(|(fd, _)| fd)
            .collect();
        let [fd] = new[..] else {
            return Err(self);
        };
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor just listed; at worst EBADF.
        let kept = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if kept < 0 {
            return Err(self);
        }
        // SAFETY: a descriptor just made by fcntl, owned from here on.
        let kept = unsafe { OwnedFd::from_raw_fd(kept) };
        let lib = self.lib;
        drop(self);
        // SAFETY: `open`'s reference to the library, given back once (the context that used
        // it is freed); then glibc's malloc_trim, which only returns free memory.
        unsafe {
            libc::dlclose(lib);
            libc::malloc_trim(0);
        }
        Ok(OwnerSocket(kept))
    }

    fn buffer(&self, get: GetBufferFn) -> String {
        // SAFETY: a live context; the buffer is NUL-terminated and owned by it.
        let text = unsafe { get(self.ctx) };
        // SAFETY: NULL or NUL-terminated, as above.
        unsafe { c_string(text) }.unwrap_or_default()
    }
}

// SAFETY: a libnftables context may move between threads; tfcluster uses each from one thread at
// a time (slurmstepd's state lock).
unsafe impl Send for Nft {}

impl Drop for Nft {
    fn drop(&mut self) {
        // SAFETY: the context was made by nft_ctx_new and is freed once.
        unsafe { (self.free)(self.ctx) }
    }
}

/// A netfilter netlink socket of this process's own, close-on-exec.
fn netfilter_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_NETFILTER,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by the caller alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether libnftables can open its netlink socket now: a socket of that kind opened and closed
/// again. libnftables (1.0.6, Debian 12's) calls `exit()` in the process that calls it when it
/// cannot (no descriptor free, no memory), which would end slurmstepd, or the job epilog's
/// process, without a word: the caller gets this error instead, and says so.
fn netlink_socket_free() -> Result<(), String> {
    netfilter_socket().map(drop).map_err(|e| {
        format!(
            "cannot open a netfilter netlink socket ({e}), so {LIBRARY} was not called (it \
             would end this process)"
        )
    })
}

/// Installs the table `script` describes with the core's own messages
/// ([`crate::core::isolation::messages`]) through a netfilter socket of its own, which owns the
/// table where the script says `flags owner` (and lets it go when closed, unless `persist`); no
/// libnftables is loaded. `Ok(None)`: the core does not write that script, and the caller
/// hands it to libnftables; `Err`: the kernel refused it, or did not answer in time.
pub fn install(script: &str) -> Result<Option<OwnerSocket>, String> {
    let Some(install) = crate::core::isolation::messages::install_request(script) else {
        return Ok(None);
    };
    let socket =
        netfilter_socket().map_err(|e| format!("cannot open a netfilter netlink socket: {e}"))?;
    crate::spank::netlink::transact(socket.as_raw_fd(), |seq| install.batch(seq))?;
    Ok(Some(OwnerSocket(socket)))
}

/// The ports in set `ports` of another step's `table`, asked of the kernel (one dump, no
/// libnftables); `None` where the kernel does not list them (the table or its set has gone).
pub fn set_ports(table: &str) -> Option<Vec<u16>> {
    use crate::core::isolation::messages;
    let request = messages::set_elements_request(table, "ports");
    let replies =
        crate::spank::netlink::dump(libc::NETLINK_NETFILTER, &request, messages::set_ports_reply)?;
    Some(replies.into_iter().flatten().collect())
}

/// Deletes `table`, which no live process owns (a table that outlives its owner, or one whose
/// owner has gone), with one hand-built transaction through a netfilter socket of its own
/// ([`crate::core::isolation::messages::deletion_request`]): the job epilog's removal, without
/// loading libnftables and the ruleset it reads first. A table a live process owns is that
/// process's alone: the kernel refuses (`Operation not permitted`).
pub fn delete_table(table: &str) -> Result<(), String> {
    let socket =
        netfilter_socket().map_err(|e| format!("cannot open a netfilter netlink socket: {e}"))?;
    delete_through(&socket, table)
}

/// Sends the deletion of `table` through `socket` and waits for the kernel's answer (at most
/// [`crate::spank::netlink::transact`]'s deadline); why not, where it refused or did not answer.
fn delete_through(socket: &OwnedFd, table: &str) -> Result<(), String> {
    crate::spank::netlink::transact(socket.as_raw_fd(), |seq| {
        crate::core::isolation::messages::deletion_request(table, seq)
    })
    .map_err(|e| format!("the kernel did not delete table inet {table}: {e}"))
}

/// The netlink socket that owns a step's table once libnftables is let go
/// ([`Nft::release`]): the table stays owned (no other process may change or delete it, and
/// `nft flush ruleset` leaves it) for as long as the socket is open, and its owner deletes it
/// with a transaction of its own ([`crate::core::isolation::messages::deletion_request`]).
/// Close-on-exec: no task inherits it.
pub struct OwnerSocket(OwnedFd);

impl OwnerSocket {
    /// Deletes `table`, which this socket owns; why not, where the kernel refused or did not
    /// answer in time.
    pub fn delete(&self, table: &str) -> Result<(), String> {
        delete_through(&self.0, table)
    }
}

/// Marks every netfilter netlink socket of this process close-on-exec. libnftables opens its
/// socket without the flag, and slurmstepd keeps the context (whose socket owns the step's
/// table) while it forks the tasks: each task's program would inherit a socket root opened,
/// and with it the power to keep the owned table alive after its job.
fn close_on_exec_netfilter_sockets() {
    for (fd, _) in netfilter_sockets() {
        // SAFETY: fcntl on a descriptor number; at worst EBADF.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// This process's netfilter netlink sockets: each descriptor, and its socket's inode.
fn netfilter_sockets() -> Vec<(c_int, u64)> {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let option = |fd: c_int, name: c_int| -> Option<c_int> {
        let mut value: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are valid for writes of an int and its size; a descriptor
        // that is not a socket (or closed meanwhile) makes the call fail, nothing else.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&mut value as *mut c_int).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(value)
    };
    let inode = |fd: c_int| -> Option<u64> {
        // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `stat` is valid for writes; a closed descriptor makes the call fail.
        (unsafe { libc::fstat(fd, &mut stat) } == 0).then_some(stat.st_ino)
    };
    fds.flatten()
        .filter_map(|fd| fd.file_name().to_str()?.parse::<c_int>().ok())
        .filter(|&fd| {
            option(fd, libc::SO_DOMAIN) == Some(libc::AF_NETLINK)
                && option(fd, libc::SO_PROTOCOL) == Some(libc::NETLINK_NETFILTER)
        })
        .filter_map(|fd| Some((fd, inode(fd)?)))
        .collect()
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call.
    let text = unsafe { libc::dlerror() };
    // SAFETY: as above.
    unsafe { c_string(text) }.unwrap_or_else(|| "unknown error".into())
}

/// The names of the node's `inet` tables, asked of the kernel by name alone
/// ([`crate::core::isolation::tables::dump_request`]; libnftables' `list tables` costs the
/// square of the tables). A dump that the tables' changes interrupted is asked again, three times at
/// most; an error says the kernel did not answer.
pub fn node_tables() -> Result<Vec<String>, String> {
    Ok(owned_tables()?.into_iter().map(|t| t.name).collect())
}

/// [`node_tables`], each with the user its comment names
/// ([`crate::core::isolation::tables::owner_comment`]).
pub fn owned_tables() -> Result<Vec<crate::core::isolation::tables::Listed>, String> {
    use crate::core::isolation::tables;
    for _ in 0..3 {
        if let Some(listed) = crate::spank::netlink::dump(
            libc::NETLINK_NETFILTER,
            &tables::dump_request(),
            tables::dump_reply,
        ) {
            return Ok(listed.into_iter().filter(|t| !t.name.is_empty()).collect());
        }
    }
    Err("the kernel did not list its nftables tables (NETLINK_NETFILTER)".into())
}
