//! The helper's pool imported for the device (`VK_EXT_external_memory_host`): a job whose
//! columns lie in it back to back (data, P, Q, as the ring lays a stripe out) is computed where
//! it is, with neither staging copy.

use super::{vk_err, Gpu, VulkanError};
use ash::vk;
use graid_parity::Job;

/// The device's import support: the extension's functions and the alignment it needs.
pub(super) struct HostImport {
    pub(super) ext: ash::ext::external_memory_host::Device,
    pub(super) alignment: u64,
}

/// The imported region and the buffer over it.
pub(super) struct Shared {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    base: usize,
    len: usize,
}

impl Gpu {
    /// Imports `base..base + len` for the device, forgetting the region before; `None` only
    /// forgets. `Ok(false)` with no region; `Err` says why it could not (jobs are then staged).
    pub(crate) fn share(&mut self, region: Option<(*mut u8, usize)>) -> Result<bool, VulkanError> {
        self.free_shared();
        let Some((base, len)) = region else {
            return Ok(false);
        };
        let unsupported = vk_err("VK_EXT_external_memory_host");
        let import = self
            .host_import
            .as_ref()
            .ok_or_else(|| unsupported(vk::Result::ERROR_EXTENSION_NOT_PRESENT))?;
        let aligned = |v: usize| (v as u64).is_multiple_of(import.alignment.max(1));
        if !aligned(base as usize) || !aligned(len) || len == 0 {
            return Err(VulkanError::Misaligned {
                alignment: import.alignment,
            });
        }
        if len as u64 > self.max_range {
            return Err(VulkanError::PoolTooBig {
                bytes: len as u64,
                max: self.max_range,
            });
        }
        let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        let mut host_props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: `base` is host memory of `len` bytes (the caller's promise), aligned as the
        // device asks; the function pointer comes from the enabled extension.
        let result = unsafe {
            (import.ext.fp().get_memory_host_pointer_properties_ext)(
                self.device.handle(),
                handle,
                base.cast_const().cast(),
                &mut host_props,
            )
        };
        if result != vk::Result::SUCCESS {
            return Err(vk_err("vkGetMemoryHostPointerPropertiesEXT")(result));
        }
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
        let info = vk::BufferCreateInfo::default()
            .size(len as u64)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        let d = &self.device;
        // SAFETY: a valid create info; destroyed in `free_shared` or below.
        let buffer = unsafe { d.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        // SAFETY: the buffer just made.
        let needs = unsafe { d.get_buffer_memory_requirements(buffer) };
        // Coherent, so the host's writes and the device's need no flush or invalidate.
        let index = self.memory_type(
            needs.memory_type_bits & host_props.memory_type_bits,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        );
        let mut import_info = vk::ImportMemoryHostPointerInfoEXT::default()
            .handle_type(handle)
            .host_pointer(base.cast());
        let memory = index
            .ok_or(vk::Result::ERROR_FORMAT_NOT_SUPPORTED)
            .and_then(|index| {
                let alloc = vk::MemoryAllocateInfo::default()
                    .allocation_size(len as u64)
                    .memory_type_index(index)
                    .push_next(&mut import_info);
                // SAFETY: imports the caller's memory, valid until `free_shared`; bound once.
                unsafe {
                    let memory = d.allocate_memory(&alloc, None)?;
                    match d.bind_buffer_memory(buffer, memory, 0) {
                        Ok(()) => Ok(memory),
                        Err(e) => {
                            d.free_memory(memory, None);
                            Err(e)
                        }
                    }
                }
            });
        let memory = match memory {
            Ok(memory) => memory,
            Err(result) => {
                // SAFETY: the buffer is unused.
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(vk_err("import the pool")(result));
            }
        };
        self.bind_set(self.shared_set, buffer);
        self.shared = Some(Shared {
            buffer,
            memory,
            base: base as usize,
            len,
        });
        Ok(true)
    }

    pub(super) fn free_shared(&mut self) {
        if let Some(s) = self.shared.take() {
            // SAFETY: no batch runs (each waits for its fence); the memory stays the caller's.
            unsafe {
                self.device.destroy_buffer(s.buffer, None);
                self.device.free_memory(s.memory, None);
            }
        }
    }

    /// The word offset in the shared region of `job`'s first column, if every column lies in
    /// it, back to back in the shader's order.
    pub(super) fn shared_base(&self, job: &Job<'_>) -> Option<u32> {
        let shared = self.shared.as_ref()?;
        let columns = graid_parity::device::plan(job)?.columns;
        let len = columns.first()?.len();
        let first = columns.first()?.as_ptr() as usize;
        let in_order = columns
            .iter()
            .enumerate()
            .all(|(i, c)| c.len() == len && c.as_ptr() as usize == first + i * len);
        let offset = first.checked_sub(shared.base)?;
        let end = offset.checked_add(columns.len() * len)?;
        (in_order && offset % 4 == 0 && end <= shared.len)
            .then(|| u32::try_from(offset / 4).ok())
            .flatten()
    }
}
