// npu_dma: single reads for the command processor (ring entries, instruction fetch).
//
// Reads one "row" (1..ROW_BYTES bytes) from DRAM, either through the job's flat page table
// (docs/architecture.md 1.2) or, for ring entries, at a physical address. A row that crosses a
// 64 KiB page is split in two pieces; both pieces are translated (and checked) before any byte
// moves. LOAD and STORE have their own pipelined paths (npu_ldq, npu_stq).
//
// Memory port: one request per burst; a read carries a beat count and is answered by that many
// response beats (in order, no back-pressure on responses). Addresses are beat aligned.
//
// Translation cache: two single-entry TLBs (index 0 spare, 1 instruction fetch). They are
// flushed at every EXEC and whenever a STORE writes into the page table (tlb_flush_i), so the
// observable behaviour is identical to walking the table on every access.
module npu_dma
  import npu_config_pkg::*;
#(
  parameter int unsigned ROW_BYTES = 64,
  parameter int unsigned BEAT_BYTES = 16
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  logic                      hold_i,       // freeze (register-write cycles)
  input  logic                      clear_i,      // soft reset: abort, drop TLBs

  // Request from the controller (sampled when start_i is high and busy_o is low).
  input  logic                      start_i,
  input  logic                      phys_i,       // physical access (ring entries), read only
  input  logic                      ifetch_i,     // use the instruction TLB entry
  input  logic [31:0]               addr_i,       // VA, or PA when phys_i
  input  logic [7:0]                len_i,        // bytes, 1..ROW_BYTES
  input  logic [31:0]               pt_base_i,
  input  logic                      tlb_flush_i,
  input  logic [32:0]               dram_bytes_i,

  output logic                      busy_o,
  output logic                      done_o,       // one-cycle pulse
  output logic                      err_o,        // qualifies done_o
  output logic [7:0]                err_code_o,
  output logic [31:0]               err_addr_o,
  output logic [ROW_BYTES*8-1:0]    rdata_o,      // valid with done_o for reads
  output logic                      stall_o,      // waiting on a read response

  output logic                      mem_req_valid_o,
  input  logic                      mem_req_ready_i,
  output logic [31:0]               mem_req_addr_o,
  output logic [7:0]                mem_req_beats_o,
  input  logic                      mem_rsp_valid_i,
  input  logic [BEAT_BYTES*8-1:0]   mem_rsp_data_i
);
  localparam int unsigned BB = BEAT_BYTES * 8;               // beat bits
  localparam int unsigned RB = ROW_BYTES * 8;                // row bits
  localparam int unsigned MAXBEATS = ROW_BYTES / BEAT_BYTES + 1;
  localparam int unsigned BUFB = MAXBEATS * BB;              // burst buffer bits
  localparam int unsigned OFFW = $clog2(BEAT_BYTES);
  localparam int unsigned BCW = $clog2(MAXBEATS + 1);

  typedef enum logic [3:0] {
    D_IDLE, D_XL, D_PTE_WAIT, D_CHK, D_RD_REQ, D_RD_WAIT, D_RD_PUT
  } dstate_e;

  dstate_e st_q;
  logic ifetch_q, two_q, piece_q;
  logic [31:0] va_q, va1_q;
  logic [OFFW-3:0] pte_word_q;            // 32-bit word of the PTE within its beat
  logic [8:0] len0_q, len1_q;
  logic [31:0] pa0_q, pa1_q;
  logic [31:0] pte_q;
  logic [RB-1:0] row_q;                 // read result
  logic [BUFB-1:0] buf_q;               // burst assembly
  logic [BCW-1:0] beat_q, nbeats_q;

  logic       tlb_v_q [2];
  logic [15:0] tlb_page_q [2];
  logic [31:0] tlb_pte_q [2];

  assign busy_o = (st_q != D_IDLE);
  assign rdata_o = row_q;
  assign stall_o = (st_q == D_PTE_WAIT) || (st_q == D_RD_WAIT);

  // Current piece, derived from registered state.
  logic [31:0] cur_va, cur_pa;
  logic [8:0]  cur_len, cur_off;
  assign cur_va  = piece_q ? va1_q : va_q;
  assign cur_pa  = piece_q ? pa1_q : pa0_q;
  assign cur_len = piece_q ? len1_q : len0_q;
  assign cur_off = piece_q ? len0_q : 9'd0;

  function automatic logic [BCW-1:0] beats_for(input logic [OFFW-1:0] off, input logic [8:0] len);
    logic [9:0] span;
    span = 10'(off) + 10'(len) + 10'(BEAT_BYTES - 1);
    return BCW'(span >> OFFW);
  endfunction

  // True when [pa, pa+len) is not wholly inside DRAM.
  function automatic logic out_of_dram(input logic [33:0] pa, input logic [8:0] len,
                                       input logic [32:0] size);
    return (pa + 34'(len)) > 34'(size);
  endfunction

  always_ff @(posedge clk_i) begin
    if (!rst_ni || clear_i) begin
      st_q <= D_IDLE;
      done_o <= 1'b0;
      err_o <= 1'b0;
      err_code_o <= ERR_NONE;
      err_addr_o <= '0;
      mem_req_valid_o <= 1'b0;
      mem_req_addr_o <= '0;
      mem_req_beats_o <= '0;
      tlb_v_q[0] <= 1'b0;
      tlb_v_q[1] <= 1'b0;
    end else if (!hold_i) begin
      done_o <= 1'b0;
      err_o <= 1'b0;
      if (tlb_flush_i) begin
        tlb_v_q[0] <= 1'b0;
        tlb_v_q[1] <= 1'b0;
      end
      unique case (st_q)
        D_IDLE: begin
          if (start_i) begin
            ifetch_q <= ifetch_i;
            va_q <= addr_i;
            piece_q <= 1'b0;
            row_q <= '0;
            if (phys_i) begin
              two_q <= 1'b0;
              len0_q <= 9'(len_i);
              pa0_q <= addr_i;
              if (out_of_dram({2'b00, addr_i}, 9'(len_i), dram_bytes_i)) begin
                done_o <= 1'b1;
                err_o <= 1'b1;
                err_code_o <= ERR_BUS_ERROR;
                err_addr_o <= addr_i;
              end else begin
                st_q <= D_RD_REQ;
              end
            end else begin
              if ((17'(addr_i[15:0]) + 17'(len_i)) > 17'h10000) begin
                two_q <= 1'b1;
                len0_q <= 9'(17'h10000 - 17'(addr_i[15:0]));
                len1_q <= 9'(17'(len_i) - (17'h10000 - 17'(addr_i[15:0])));
                va1_q <= {addr_i[31:16] + 16'd1, 16'h0000};
              end else begin
                two_q <= 1'b0;
                len0_q <= 9'(len_i);
              end
              st_q <= D_XL;
            end
          end
        end

        D_XL: begin
          if (tlb_v_q[ifetch_q] && !tlb_flush_i && tlb_page_q[ifetch_q] == cur_va[31:16]) begin
            pte_q <= tlb_pte_q[ifetch_q];
            st_q <= D_CHK;
          end else begin
            logic [33:0] pa;
            pa = {2'b00, pt_base_i} + {16'h0, cur_va[31:16], 2'b00};
            pte_word_q <= pa[OFFW-1:2];
            if (out_of_dram(pa, 9'd4, dram_bytes_i)) begin
              st_q <= D_IDLE;
              done_o <= 1'b1;
              err_o <= 1'b1;
              err_code_o <= ERR_BUS_ERROR;
              err_addr_o <= pa[31:0];
            end else begin
              mem_req_valid_o <= 1'b1;
              mem_req_addr_o <= {pa[31:OFFW], OFFW'(0)};
              mem_req_beats_o <= 8'd1;
              st_q <= D_PTE_WAIT;
            end
          end
        end

        D_PTE_WAIT: begin
          if (mem_req_valid_o && mem_req_ready_i) mem_req_valid_o <= 1'b0;
          if (mem_rsp_valid_i) begin
            logic [31:0] pte;
            pte = mem_rsp_data_i[pte_word_q*32 +: 32];
            pte_q <= pte;
            tlb_v_q[ifetch_q] <= 1'b1;
            tlb_page_q[ifetch_q] <= cur_va[31:16];
            tlb_pte_q[ifetch_q] <= pte;
            st_q <= D_CHK;
          end
        end

        D_CHK: begin
          logic [31:0] pa;
          pa = {pte_q[31:16], cur_va[15:0]};
          if (!pte_q[0]) begin
            st_q <= D_IDLE;
            done_o <= 1'b1;
            err_o <= 1'b1;
            err_code_o <= ERR_PAGE_FAULT;
            err_addr_o <= cur_va;
          end else if (out_of_dram({2'b00, pa}, cur_len, dram_bytes_i)) begin
            st_q <= D_IDLE;
            done_o <= 1'b1;
            err_o <= 1'b1;
            err_code_o <= ERR_BUS_ERROR;
            err_addr_o <= pa;
          end else begin
            if (piece_q) pa1_q <= pa; else pa0_q <= pa;
            if (!piece_q && two_q) begin
              piece_q <= 1'b1;
              st_q <= D_XL;
            end else begin
              piece_q <= 1'b0;
              st_q <= D_RD_REQ;
            end
          end
        end

        D_RD_REQ: begin
          mem_req_valid_o <= 1'b1;
          mem_req_addr_o <= {cur_pa[31:OFFW], OFFW'(0)};
          mem_req_beats_o <= 8'(beats_for(cur_pa[OFFW-1:0], cur_len));
          nbeats_q <= beats_for(cur_pa[OFFW-1:0], cur_len);
          beat_q <= '0;
          st_q <= D_RD_WAIT;
        end

        D_RD_WAIT: begin
          if (mem_req_valid_o && mem_req_ready_i) mem_req_valid_o <= 1'b0;
          if (mem_rsp_valid_i) begin
            buf_q[beat_q*BB +: BB] <= mem_rsp_data_i;
            beat_q <= beat_q + 1'b1;
            if (beat_q + 1'b1 == nbeats_q) st_q <= D_RD_PUT;
          end
        end

        D_RD_PUT: begin
          logic [RB-1:0] piece, mask;
          mask = ~({RB{1'b1}} << {cur_len, 3'b000});
          piece = RB'(buf_q >> {cur_pa[OFFW-1:0], 3'b000}) & mask;
          row_q <= row_q | (piece << {cur_off, 3'b000});
          if (!piece_q && two_q) begin
            piece_q <= 1'b1;
            st_q <= D_RD_REQ;
          end else begin
            st_q <= D_IDLE;
            done_o <= 1'b1;
          end
        end

        default: st_q <= D_IDLE;
      endcase
    end
  end
endmodule
