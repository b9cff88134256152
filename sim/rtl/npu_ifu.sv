// npu_ifu: the command processor's fetch unit (ring entries and instructions).
//
// Ring entries are read at their physical address (32 bytes, no caching). Instructions are
// fetched through the job's page table in blocks of up to BLOCK_BYTES (never past the end of
// the page, of the command buffer or of DRAM) into a buffer; later instructions of the block
// are delivered from it. The buffer only ever returns what an instruction-by-instruction fetch
// would: it is dropped at every EXEC and page-table write (flush_i) and whenever a STORE
// writes a beat into its physical range (inval_i; also while the block is being read, which
// then leaves the buffer empty after the delivery, since STOREs run beside fetch), and faults are checked on the instruction that is
// actually requested (a block never extends past the page that instruction validated).
//
// Memory port: read bursts only; responses arrive in order.
module npu_ifu
  import npu_config_pkg::*;
#(
  parameter int unsigned BEAT_BYTES = 16,
  parameter int unsigned BLOCK_BYTES = 256
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  logic                      hold_i,
  input  logic                      clear_i,
  input  logic                      flush_i,
  input  logic                      inval_i,
  input  logic [31:0]               inval_pa_i,
  input  logic [8:0]                inval_len_i,
  input  logic [31:0]               pt_base_i,
  input  logic [32:0]               dram_bytes_i,

  input  logic                      start_i,      // sampled when busy_o is low
  input  logic                      phys_i,       // ring entry at a physical address
  input  logic [31:0]               addr_i,       // VA (32-byte aligned) or PA
  input  logic [31:0]               limit_i,      // bytes of the command buffer from addr_i

  output logic                      busy_o,
  output logic                      done_o,       // one-cycle pulse
  output logic                      err_o,        // qualifies done_o
  output logic [7:0]                err_code_o,
  output logic [31:0]               err_addr_o,
  output logic [255:0]              data_o,       // valid with done_o
  output logic                      stall_o,

  output logic                      mem_req_valid_o,
  input  logic                      mem_req_ready_i,
  output logic [31:0]               mem_req_addr_o,
  output logic [7:0]                mem_req_beats_o,
  input  logic                      mem_rsp_valid_i,
  input  logic [BEAT_BYTES*8-1:0]   mem_rsp_data_i
);
  localparam int unsigned BB = BEAT_BYTES * 8;
  localparam int unsigned NB = BLOCK_BYTES / BEAT_BYTES;   // beats per block
  localparam int unsigned IB = 32 / BEAT_BYTES;             // beats per instruction
  localparam int unsigned BW = $clog2(NB);
  localparam int unsigned OFFW = $clog2(BEAT_BYTES);

  typedef enum logic [2:0] { F_IDLE, F_XL, F_PTE_WAIT, F_CHK, F_FILL, F_DELIVER } fstate_e;
  fstate_e st_q;

  logic [BB-1:0] buf_q [NB];
  logic          buf_v_q;                 // the buffer holds a block of the current job
  logic          stale_q;                 // a STORE wrote into the block while it was read
  logic [31:0]   buf_va_q, buf_pa_q;
  logic [9:0]    buf_len_q;               // bytes, multiple of 32
  logic [31:0]   va_q, limit_q;
  logic          phys_q;
  logic [31:0]   pte_q;
  logic [OFFW-3:0] pte_word_q;
  logic          tlb_v_q;
  logic [15:0]   tlb_page_q;
  logic [31:0]   tlb_pte_q;
  logic [BW:0]   beat_q, nbeats_q;
  logic [BW-1:0] idx_q;                   // first beat of the instruction to deliver

  assign busy_o = (st_q != F_IDLE);
  assign stall_o = (st_q == F_PTE_WAIT) || (st_q == F_FILL);

  // The requested instruction is in the buffer.
  logic [31:0] hit_off;
  logic        hit;
  assign hit_off = addr_i - buf_va_q;
  assign hit = buf_v_q && !flush_i && !phys_i && hit_off < 32'(buf_len_q);

  function automatic logic out_of_dram(input logic [33:0] pa, input logic [9:0] len,
                                       input logic [32:0] size);
    return (pa + 34'(len)) > 34'(size);
  endfunction

  always_ff @(posedge clk_i) begin
    if (!rst_ni || clear_i) begin
      st_q <= F_IDLE;
      done_o <= 1'b0;
      err_o <= 1'b0;
      err_code_o <= ERR_NONE;
      err_addr_o <= '0;
      buf_v_q <= 1'b0;
      tlb_v_q <= 1'b0;
      mem_req_valid_o <= 1'b0;
      mem_req_addr_o <= '0;
      mem_req_beats_o <= '0;
    end else if (!hold_i) begin
      done_o <= 1'b0;
      err_o <= 1'b0;
      if (mem_req_valid_o && mem_req_ready_i) mem_req_valid_o <= 1'b0;
      if (flush_i) begin
        buf_v_q <= 1'b0;
        tlb_v_q <= 1'b0;
      end
      // A STORE into the buffered block (or the block being read): fetch it again from DRAM.
      if (inval_i && {2'b00, inval_pa_i} + 34'(inval_len_i) > {2'b00, buf_pa_q} &&
          {2'b00, inval_pa_i} < {2'b00, buf_pa_q} + 34'(buf_len_q)) begin
        buf_v_q <= 1'b0;
        if (st_q == F_FILL) stale_q <= 1'b1;
      end

      unique case (st_q)
        F_IDLE: begin
          if (start_i) begin
            va_q <= addr_i;
            limit_q <= limit_i;
            phys_q <= phys_i;
            if (hit) begin
              idx_q <= BW'(hit_off >> OFFW);
              st_q <= F_DELIVER;
            end else if (phys_i) begin
              if (out_of_dram({2'b00, addr_i}, 10'd32, dram_bytes_i)) begin
                done_o <= 1'b1;
                err_o <= 1'b1;
                err_code_o <= ERR_BUS_ERROR;
                err_addr_o <= addr_i;
              end else begin
                // The ring entry goes through the buffer, which then holds no instructions.
                buf_v_q <= 1'b0;
                buf_pa_q <= addr_i;
                mem_req_valid_o <= 1'b1;
                mem_req_addr_o <= {addr_i[31:OFFW], OFFW'(0)};
                mem_req_beats_o <= 8'(IB);
                nbeats_q <= (BW+1)'(IB);
                beat_q <= '0;
                idx_q <= '0;
                st_q <= F_FILL;
              end
            end else begin
              st_q <= F_XL;
            end
          end
        end

        F_XL: begin
          if (tlb_v_q && tlb_page_q == va_q[31:16]) begin
            pte_q <= tlb_pte_q;
            st_q <= F_CHK;
          end else begin
            logic [33:0] pa;
            pa = {2'b00, pt_base_i} + {16'h0, va_q[31:16], 2'b00};
            pte_word_q <= pa[OFFW-1:2];
            if (out_of_dram(pa, 10'd4, dram_bytes_i)) begin
              st_q <= F_IDLE;
              done_o <= 1'b1;
              err_o <= 1'b1;
              err_code_o <= ERR_BUS_ERROR;
              err_addr_o <= pa[31:0];
            end else begin
              mem_req_valid_o <= 1'b1;
              mem_req_addr_o <= {pa[31:OFFW], OFFW'(0)};
              mem_req_beats_o <= 8'd1;
              st_q <= F_PTE_WAIT;
            end
          end
        end

        F_PTE_WAIT: begin
          if (mem_rsp_valid_i) begin
            logic [31:0] pte;
            pte = mem_rsp_data_i[pte_word_q*32 +: 32];
            pte_q <= pte;
            tlb_v_q <= 1'b1;
            tlb_page_q <= va_q[31:16];
            tlb_pte_q <= pte;
            st_q <= F_CHK;
          end
        end

        F_CHK: begin
          logic [31:0] pa;
          logic [33:0] len, room;
          pa = {pte_q[31:16], va_q[15:0]};
          if (!pte_q[0]) begin
            st_q <= F_IDLE;
            done_o <= 1'b1;
            err_o <= 1'b1;
            err_code_o <= ERR_PAGE_FAULT;
            err_addr_o <= va_q;
          end else if (out_of_dram({2'b00, pa}, 10'd32, dram_bytes_i)) begin
            st_q <= F_IDLE;
            done_o <= 1'b1;
            err_o <= 1'b1;
            err_code_o <= ERR_BUS_ERROR;
            err_addr_o <= pa;
          end else begin
            // Block: up to BLOCK_BYTES, within the page, the command buffer and DRAM.
            len = 34'(BLOCK_BYTES);
            room = 34'h10000 - 34'(va_q[15:0]);
            if (room < len) len = room;
            if (34'(limit_q) < len) len = 34'(limit_q);
            room = 34'(dram_bytes_i) - {2'b00, pa};
            if (room < len) len = room;
            len = len & ~34'd31;
            buf_v_q <= 1'b0;
            buf_va_q <= va_q;
            buf_pa_q <= pa;
            buf_len_q <= 10'(len);
            stale_q <= 1'b0;
            mem_req_valid_o <= 1'b1;
            mem_req_addr_o <= pa;
            mem_req_beats_o <= 8'(len >> OFFW);
            nbeats_q <= (BW+1)'(len >> OFFW);
            beat_q <= '0;
            idx_q <= '0;
            st_q <= F_FILL;
          end
        end

        F_FILL: begin
          if (mem_rsp_valid_i) begin
            buf_q[BW'(beat_q)] <= mem_rsp_data_i;
            beat_q <= beat_q + 1'b1;
            if (beat_q + 1'b1 == nbeats_q) begin
              // The requested instruction is current (fetch waits for STOREs that overlap
              // it); the rest of the block only if no STORE wrote into it meanwhile.
              buf_v_q <= !phys_q && !stale_q && !(inval_i &&
                  {2'b00, inval_pa_i} + 34'(inval_len_i) > {2'b00, buf_pa_q} &&
                  {2'b00, inval_pa_i} < {2'b00, buf_pa_q} + 34'(buf_len_q));
              st_q <= F_DELIVER;
            end
          end
        end

        F_DELIVER: begin
          for (int b = 0; b < int'(IB); b++) data_o[b*BB +: BB] <= buf_q[idx_q + BW'(b)];
          done_o <= 1'b1;
          st_q <= F_IDLE;
        end

        default: st_q <= F_IDLE;
      endcase
    end
  end
endmodule
